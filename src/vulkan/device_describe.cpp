// DeviceInfo's words: Vulkan-free, so a build without Vulkan compiles it too.
#include <cstdio>

#include "vulkan/device_info.h"

namespace herd::vulkan {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kIntegrated:
      return "integrated";
    case DeviceType::kDiscrete:
      return "discrete";
    case DeviceType::kVirtual:
      return "virtual";
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kOther:
      break;
  }
  return "other";
}

uint64_t DeviceInfo::device_local_bytes() const {
  uint64_t sum = 0;
  for (const MemoryHeap& h : heaps) {
    if (h.device_local) sum += h.bytes;
  }
  return sum;
}

namespace {

// "24.0 GiB", or "128 MiB" below 1 GiB.
std::string gib(uint64_t bytes) {
  char text[32];
  if (bytes < (1ull << 30)) {
    std::snprintf(text, sizeof(text), "%.0f MiB", static_cast<double>(bytes) / (1ull << 20));
  } else {
    std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  }
  return text;
}

}  // namespace

std::string describe(const DeviceInfo& d) {
  std::string s = "vulkan:" + std::to_string(d.index) + "  " + d.name + " (" +
                  device_type_name(d.type) + ", " + d.vendor + ", Vulkan " + d.api_version + ")\n";
  s += "  driver      " + d.driver + "\n";
  for (size_t h = 0; h < d.heaps.size(); ++h) {
    const MemoryHeap& heap = d.heaps[h];
    s += "  heap " + std::to_string(h) + "      " + gib(heap.bytes);
    if (heap.budget != 0) s += " (budget " + gib(heap.budget) + ")";
    if (heap.device_local) s += " device-local";
    if (heap.host_visible) s += " host-visible";
    s += "\n";
  }
  s += std::string("  memory      ") + (d.unified_memory ? "unified with the host" : "own") + "\n";
  std::string ops;
  for (const std::string& op : d.subgroup_operations) {
    if (!ops.empty()) ops += ' ';
    ops += op;
  }
  s += "  subgroups   " + std::to_string(d.subgroup_size) +
       " lanes: " + (ops.empty() ? "none in compute shaders" : ops) + "\n";
  std::string features;
  const auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!features.empty()) features += ' ';
    features += name;
  };
  add(d.shader_float16, "float16");
  add(d.shader_int8, "int8");
  add(d.storage_16bit, "16-bit-storage");
  add(d.storage_8bit, "8-bit-storage");
  add(d.integer_dot_product, "integer-dot-product");
  add(d.cooperative_matrix, "cooperative-matrix");
  s += "  features    " +
       (features.empty() ? std::string("none of herd's optional ones") : features) + "\n";
  s += "  limits      workgroup " + std::to_string(d.max_workgroup_size) + ", shared memory " +
       std::to_string(d.max_shared_memory / 1024) + " KiB, storage buffer " +
       gib(d.max_storage_buffer_range) +
       (d.max_allocation != 0 ? ", allocation " + gib(d.max_allocation) : std::string()) + "\n";
  return s;
}

}  // namespace herd::vulkan
