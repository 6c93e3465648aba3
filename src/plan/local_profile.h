// The profile of the machine this process runs on. Not part of the pure planner: it asks
// the OS for cores and memory (util/cpu_info.h, util/system_memory.h) and measures memory
// bandwidth. Used by
// `herd plan` now and by the node daemon when it answers a PROFILE request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/node_profile.h"
#include "util/thread_pool.h"

namespace herd {

struct LocalProfileOptions {
  std::string name;  // empty: the host name
  std::string address = "local";
  double bandwidth_gbs = 0;                // 0: measure it with the pool's threads
  size_t probe_bytes = size_t{256} << 20;  // buffer the bandwidth probe streams
  bool measure_matmul = false;             // also time a quantized matrix product (~0.2 s)
  double matmul_gflops = 0;                // > 0: report this instead of measuring it
  // --device: the GPU the node runs models on ("cpu": none; "auto": the first integrated or
  // discrete GPU, not a CPU driver; "vulkan[:N]": that device), and whether to time its
  // copy bandwidth (~0.1 s on a GPU).
  std::string device = "cpu";
  bool measure_device = false;
};

// The GPUs --device names on this machine (local_profile's `devices`): none for "cpu", or
// when "auto" finds no GPU or no Vulkan loader. Throws herd::Error for a device that is not
// there ("vulkan:3" on a machine with one).
std::vector<DeviceProfile> local_devices(const std::string& device, bool measure);

NodeProfile measure_local_profile(ThreadPool& pool, const LocalProfileOptions& options);

// GFLOP/s of a Q4_0 matrix product (4096 x 4096 weights, 64 tokens: prefill-like, compute
// bound) with the pool's threads and the best kernels of this CPU; the best of 3 runs.
double measure_matmul_gflops(ThreadPool& pool);

}  // namespace herd
