// What a machine's Vulkan devices are and offer: one DeviceInfo per physical device, read
// without creating a logical device. Plain data with no Vulkan types, so that callers (herd
// devices, the planner) need no Vulkan headers and a build without Vulkan still compiles them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::vulkan {

enum class DeviceType { kOther, kIntegrated, kDiscrete, kVirtual, kCpu };
const char* device_type_name(DeviceType type);  // "integrated", "discrete", "cpu", ...

struct MemoryHeap {
  uint64_t bytes = 0;
  uint64_t budget = 0;        // what the driver says this process may use (0: not reported)
  bool device_local = false;  // memory the device reads at its full speed
  bool host_visible = false;  // some memory type of this heap can be mapped by the CPU
};

struct DeviceInfo {
  int index = 0;  // the N of --device vulkan:N: the loader's order of physical devices
  std::string name;
  DeviceType type = DeviceType::kOther;
  uint32_t vendor_id = 0;
  std::string vendor;  // "NVIDIA", "AMD", "Intel", "Apple", "Mesa" ... or the id in hex
  std::string driver;  // driver name and version ("llvmpipe", "NVIDIA 560.35")
  std::string api_version;
  std::vector<MemoryHeap> heaps;
  // The CPU and the device share memory (integrated GPUs, Apple, lavapipe): device-local
  // memory is host-visible, so weights are written in place, with no staging copy.
  bool unified_memory = false;

  // Subgroups (warps, wavefronts, SIMD groups) in compute shaders.
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd / subgroupMax: reductions without barriers
  bool subgroup_shuffle = false;
  std::vector<std::string> subgroup_operations;  // the names of every supported class

  bool shader_float16 = false;
  bool shader_int8 = false;
  bool storage_16bit = false;        // 16-bit values in storage buffers (f16 activations, KV)
  bool storage_8bit = false;         // 8-bit values in storage buffers (quant bytes read directly)
  bool integer_dot_product = false;  // VK_KHR_shader_integer_dot_product (dp4a-style int8 dots)
  bool cooperative_matrix = false;   // VK_KHR_cooperative_matrix (tensor cores, WMMA)

  uint32_t max_workgroup_size = 0;        // invocations
  uint32_t max_shared_memory = 0;         // bytes of shared memory per workgroup
  uint64_t max_storage_buffer_range = 0;  // bytes one storage-buffer binding can address
  uint64_t max_allocation = 0;            // bytes of one allocation (0: not reported)

  uint64_t device_local_bytes() const;  // the sum of the device-local heaps
};

// Every Vulkan device of this machine, in the loader's order. Throws
// herd::Error("[vulkan] ...") when herd was built without Vulkan, when the loader
// (libvulkan) cannot be opened, or when it reports no device, each saying what to install.
std::vector<DeviceInfo> list_devices();

// GB/s (reads plus writes) of device `index`'s buffer-to-buffer copies, measured now
// (vulkan/bandwidth.h: 8 copies of 256 MiB). Throws herd::Error("[vulkan] ...") as
// list_devices() does, or when the device cannot hold two such buffers.
double measure_copy_bandwidth_gbs(int index);

// Whether this binary was built with the Vulkan runtime (CMake found Vulkan and glslc).
bool built_with_vulkan();

// One line per property, for herd devices: "name (discrete, NVIDIA), 24.0 GiB device-local ...".
std::string describe(const DeviceInfo& info);

}  // namespace herd::vulkan
