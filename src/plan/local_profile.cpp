#include "plan/local_profile.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "kernels/matmul.h"
#include "quant/types.h"
#include "util/bandwidth.h"
#include "util/cpu_info.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "vulkan/device_choice.h"
#include "vulkan/device_info.h"

namespace herd {

double measure_matmul_gflops(ThreadPool& pool) {
  constexpr int64_t kRows = 4096, kCols = 4096, kTokens = 64;
  const TypeTraits& q4 = type_traits(TensorType::Q4_0);
  std::vector<float> row(kCols);
  std::vector<uint8_t> weights(row_bytes(TensorType::Q4_0, kCols) * kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c)
      row[c] = static_cast<float>((r * 131 + c * 71) % 97) / 97.0f - 0.5f;
    q4.quantize(row.data(), weights.data() + row_bytes(TensorType::Q4_0, kCols) * r, kCols);
  }
  const kernels::Isa isa = kernels::best_isa(kernels::detect_cpu());
  kernels::PackedMatrix w =
      kernels::pack_matrix({TensorType::Q4_0, kRows, kCols, weights.data()}, isa);
  std::vector<float> x(kTokens * kCols, 0.25f), y(kTokens * kRows);
  kernels::Workspace workspace;
  double best = 1e9;
  for (int rep = 0; rep < 4; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    kernels::matmul(w, x.data(), kTokens, y.data(), pool, workspace);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::min(best, s);  // the first run warms caches and the workspace
  }
  return 2.0 * kRows * kCols * kTokens / best / 1e9;
}

std::vector<DeviceProfile> local_devices(const std::string& device, bool measure) {
  const vulkan::DeviceChoice choice = vulkan::parse_device_choice(device);
  if (choice.kind == vulkan::DeviceChoice::kCpu) return {};
  const int named =
      choice.kind == vulkan::DeviceChoice::kVulkan ? vulkan::resolve_vulkan_device(choice) : -1;
  std::vector<vulkan::DeviceInfo> found;
  try {
    found = vulkan::list_devices();
  } catch (const Error&) {
    if (named >= 0) throw;
    return {};  // auto on a machine without a Vulkan loader or driver: the CPU
  }
  for (const vulkan::DeviceInfo& d : found) {
    const bool gpu =
        d.type == vulkan::DeviceType::kDiscrete || d.type == vulkan::DeviceType::kIntegrated;
    if (named >= 0 ? d.index != named : !gpu) continue;
    DeviceProfile p;
    p.name = "vulkan:" + std::to_string(d.index);
    p.description = d.name + " (" + vulkan::device_type_name(d.type) + ")";
    p.memory_bytes = d.device_local_bytes();
    p.unified = d.unified_memory;
    // A CPU driver (lavapipe) computes with this machine's cores from its memory: the
    // planner reads its share at the CPU's bandwidth (0 here), not at its copy speed.
    const bool cpu_driver = d.type == vulkan::DeviceType::kCpu;
    p.bandwidth_gbs = measure && !cpu_driver ? vulkan::measure_copy_bandwidth_gbs(d.index) : 0;
    return {p};
  }
  return {};
}

NodeProfile measure_local_profile(ThreadPool& pool, const LocalProfileOptions& options) {
  NodeProfile node;
  node.name = options.name;
  if (node.name.empty()) {
    char host[256] = {};
    node.name = gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "local";
  }
  node.address = options.address;
  node.cores = cpu_cores().logical;
  const SystemMemory memory = system_memory();
  node.free_memory_bytes = memory.available_bytes;
  node.total_memory_bytes = memory.total_bytes;
  node.unified_memory = memory.unified;
  node.bandwidth_gbs = options.bandwidth_gbs > 0
                           ? options.bandwidth_gbs
                           : measure_read_bandwidth(pool, options.probe_bytes, 3) / 1e9;
  // Reported to the coordinator; the planner sizes shares by bandwidth for now.
  node.matmul_gflops = options.matmul_gflops > 0 ? options.matmul_gflops
                       : options.measure_matmul  ? measure_matmul_gflops(pool)
                                                 : 0;
  node.devices = local_devices(options.device, options.measure_device);
  return node;
}

}  // namespace herd
