// The device a shard runs on (backend.h): the CPU, or a Vulkan device.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace herd::engine {

// The CPU, or Vulkan device `index` (vulkan::list_devices()'s order).
struct Device {
  enum Kind { kCpu, kVulkan } kind = kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};
std::string device_name(const Device& device);  // "cpu", "vulkan:0"

// Called as a shard's weights go to its device: bytes done of the total.
using UploadProgress = std::function<void(size_t done, size_t total)>;

}  // namespace herd::engine
