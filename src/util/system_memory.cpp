#include "util/system_memory.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

#if defined(__APPLE__)
#include <mach/mach.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

namespace herd {

uint64_t meminfo_available_bytes(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t at = 0;
  while (at < meminfo.size()) {
    size_t end = meminfo.find('\n', at);
    if (end == std::string_view::npos) end = meminfo.size();
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    uint64_t kib = 0;
    const auto [rest, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || rest == line.data()) return 0;
    const std::string_view unit(rest, static_cast<size_t>(line.data() + line.size() - rest));
    if (unit != " kB") return 0;  // the kernel writes every size in kB
    if (kib > UINT64_MAX / 1024) return 0;
    return kib * 1024;
  }
  return 0;
}

#if defined(__APPLE__)

uint64_t total_memory_bytes() {
  uint64_t bytes = 0;
  size_t size = sizeof bytes;
  if (sysctlbyname("hw.memsize", &bytes, &size, nullptr, 0) != 0 || size != sizeof bytes) return 0;
  return bytes;
}

// Free, inactive and purgeable pages: what Activity Monitor shows as available (inactive
// pages hold clean file data and memory of quit apps, handed out on demand).
uint64_t available_memory_bytes() {
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm),
                        &count) != KERN_SUCCESS) {
    return 0;
  }
  const uint64_t pages =
      static_cast<uint64_t>(vm.free_count) + vm.inactive_count + vm.purgeable_count;
  const long page = sysconf(_SC_PAGESIZE);  // 16 KiB on Apple Silicon
  return page > 0 ? pages * static_cast<uint64_t>(page) : 0;
}

#else

uint64_t total_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

uint64_t available_memory_bytes() {
#if defined(__linux__)
  std::ifstream in("/proc/meminfo");
  std::ostringstream text;
  text << in.rdbuf();
  if (const uint64_t bytes = meminfo_available_bytes(text.str()); bytes > 0) return bytes;
#endif
#if defined(_SC_AVPHYS_PAGES)
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
#else
  return 0;
#endif
}

#endif

SystemMemory system_memory() {
  SystemMemory m;
  m.total_bytes = total_memory_bytes();
  m.available_bytes = available_memory_bytes();
#if defined(__APPLE__) && defined(__aarch64__)
  m.unified = true;  // every Apple Silicon Mac: the GPU has no memory of its own
#endif
  return m;
}

}  // namespace herd
