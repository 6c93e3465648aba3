// The value of --device: auto, cpu, vulkan or vulkan:N. Parsing only; which device a
// command then runs on is the caller's (the backend interface's) business.
#pragma once

#include <string>
#include <string_view>

namespace herd::vulkan {

struct DeviceChoice {
  enum Kind { kAuto, kCpu, kVulkan } kind = kAuto;
  int index = -1;  // kVulkan: the N of vulkan:N, -1 for "the first device"
};

// Throws herd::Error("[vulkan] ...") for anything else ("--device cuda", "vulkan:x").
DeviceChoice parse_device_choice(std::string_view text);

// The Vulkan device index a choice names, checked against this machine's devices: the
// choice's N (0 for plain "vulkan"). Throws herd::Error("[vulkan] ...") when herd was built
// without Vulkan, no device is there, or N is out of range (naming the devices there are).
// REQUIRES: choice.kind == kVulkan.
int resolve_vulkan_device(const DeviceChoice& choice);

}  // namespace herd::vulkan
