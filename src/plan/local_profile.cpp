#include "plan/local_profile.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "util/bandwidth.h"

#if defined(__APPLE__)
#include <mach/mach.h>
#endif

namespace herd {

uint64_t available_memory_bytes() {
#if defined(__APPLE__)
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm),
                        &count) == KERN_SUCCESS) {
    const uint64_t pages =
        static_cast<uint64_t>(vm.free_count) + vm.inactive_count + vm.purgeable_count;
    return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  return 0;
#else
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
#endif
}

NodeProfile measure_local_profile(ThreadPool& pool, const LocalProfileOptions& options) {
  NodeProfile node;
  node.name = options.name;
  if (node.name.empty()) {
    char host[256] = {};
    node.name = gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "local";
  }
  node.address = options.address;
  node.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  node.free_memory_bytes = available_memory_bytes();
  node.bandwidth_gbs = options.bandwidth_gbs > 0
                           ? options.bandwidth_gbs
                           : measure_read_bandwidth(pool, options.probe_bytes, 3) / 1e9;
  node.matmul_gflops = 0;  // not measured yet; the planner sizes shares by bandwidth
  return node;
}

}  // namespace herd
