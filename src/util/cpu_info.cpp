#include "util/cpu_info.h"

#include <algorithm>
#include <thread>

#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

namespace herd {
namespace {

#if defined(__APPLE__)
// An integer sysctl (hw.* values are 32-bit ints); 0 when the name does not exist (older
// macOS has no hw.perflevel* names).
int sysctl_int(const char* name) {
  int value = 0;
  size_t size = sizeof value;
  if (sysctlbyname(name, &value, &size, nullptr, 0) != 0 || size != sizeof value) return 0;
  return value;
}
#endif

}  // namespace

CpuCores cpu_cores() {
  CpuCores c;
#if defined(__APPLE__)
  c.logical = std::max(1, sysctl_int("hw.logicalcpu"));
  const int levels = sysctl_int("hw.nperflevels");  // 2 on Apple Silicon, absent on Intel
  if (levels >= 1) c.performance = sysctl_int("hw.perflevel0.physicalcpu");
  if (levels >= 2) c.efficiency = sysctl_int("hw.perflevel1.physicalcpu");
#else
  c.logical = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
#endif
  return c;
}

int default_thread_count(const CpuCores& cores) {
  if (cores.performance > 0) return std::min(cores.performance, std::max(1, cores.logical));
  return std::max(1, cores.logical);
}

int default_thread_count() {
  return default_thread_count(cpu_cores());
}

std::string cpu_cores_text(const CpuCores& cores) {
  std::string text = std::to_string(cores.logical) + (cores.logical == 1 ? " core" : " cores");
  if (cores.performance > 0) {
    text += " (" + std::to_string(cores.performance) + " performance";
    if (cores.efficiency > 0) text += ", " + std::to_string(cores.efficiency) + " efficiency";
    text += ")";
  }
  return text;
}

}  // namespace herd
