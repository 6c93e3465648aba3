#include "vulkan/device_choice.h"

#include <charconv>

#include "util/error.h"
#include "vulkan/device_info.h"

namespace herd::vulkan {

DeviceChoice parse_device_choice(std::string_view text) {
  if (text == "auto") return {DeviceChoice::kAuto, -1};
  if (text == "cpu") return {DeviceChoice::kCpu, -1};
  if (text == "vulkan") return {DeviceChoice::kVulkan, -1};
  constexpr std::string_view kPrefix = "vulkan:";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    const std::string_view digits = text.substr(kPrefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 &&
        !digits.empty()) {
      return {DeviceChoice::kVulkan, index};
    }
  }
  throw Error("vulkan", "--device '" + std::string(text) +
                            "': expected auto, cpu, vulkan or vulkan:N (herd devices lists them)");
}

int resolve_vulkan_device(const DeviceChoice& choice) {
  HERD_CHECK(choice.kind == DeviceChoice::kVulkan);
  const std::vector<DeviceInfo> devices = list_devices();  // throws when there are none
  const int index = choice.index < 0 ? 0 : choice.index;
  if (index >= static_cast<int>(devices.size())) {
    std::string names;
    for (const DeviceInfo& d : devices) {
      if (!names.empty()) names += ", ";
      names += "vulkan:" + std::to_string(d.index) + " " + d.name;
    }
    throw Error("vulkan", "--device vulkan:" + std::to_string(index) + ": this machine has " +
                              std::to_string(devices.size()) + " Vulkan device" +
                              (devices.size() == 1 ? "" : "s") + " (" + names + ")");
  }
  return index;
}

}  // namespace herd::vulkan
