// The machine's memory as the OS reports it: total, available to a new process, and
// whether the CPU shares it with the GPU (unified memory, as on every Apple Silicon Mac).
// Linux reads /proc/meminfo; macOS asks sysctl (hw.memsize) and the Mach VM statistics.
// docs/portability.md lists the calls per system.
#pragma once

#include <cstdint>
#include <string_view>

namespace herd {

struct SystemMemory {
  uint64_t total_bytes = 0;      // physical memory; 0 when unknown
  uint64_t available_bytes = 0;  // what a new process could take without swapping; 0 unknown
  bool unified = false;          // CPU and GPU share this memory (Apple Silicon)
};

// Thread-safe; reads the OS each call (a few system calls, no allocation on macOS).
SystemMemory system_memory();

// Memory the OS could give a new process without swapping: MemAvailable on Linux; free,
// inactive and purgeable pages on macOS; free pages elsewhere. 0 when unknown.
uint64_t available_memory_bytes();

// Physical memory in bytes: hw.memsize on macOS, _SC_PHYS_PAGES x page size elsewhere.
uint64_t total_memory_bytes();

// The `MemAvailable:` line of a /proc/meminfo text, in bytes; 0 when the line is missing
// or malformed (kernels before 3.14 lack it). Pure: tested with made-up texts.
uint64_t meminfo_available_bytes(std::string_view meminfo);

}  // namespace herd
