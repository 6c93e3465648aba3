// The cores of this machine, counted by kind. Apple Silicon has performance and efficiency
// cores (hw.perflevel0 / hw.perflevel1 in sysctl); a thread on an efficiency core runs a
// matmul row block at a fraction of the speed, and the pool's static chunks make every
// other thread wait for it, so herd's default is one thread per performance core.
// docs/portability.md lists the calls per system.
#pragma once

#include <string>

namespace herd {

struct CpuCores {
  int logical = 1;      // hardware threads the OS schedules on
  int performance = 0;  // physical performance cores; 0 when the OS does not say
  int efficiency = 0;   // physical efficiency cores; 0 when none or unknown
};

// Thread-safe. Linux: logical = std::thread::hardware_concurrency(), kinds unknown.
// macOS: hw.logicalcpu, hw.perflevel0.physicalcpu and hw.perflevel1.physicalcpu (when
// hw.nperflevels says there are two levels).
CpuCores cpu_cores();

// The thread count a pool gets when none is asked for: the performance cores when known,
// else every logical core; at least 1. Pure.
int default_thread_count(const CpuCores& cores);
// default_thread_count(cpu_cores()).
int default_thread_count();

// "10 cores (4 performance, 6 efficiency)" or "8 cores". Pure.
std::string cpu_cores_text(const CpuCores& cores);

}  // namespace herd
