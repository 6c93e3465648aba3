// The Vulkan runtime's entry points in a build without Vulkan (src/vulkan/CMakeLists.txt):
// each says so, and what to install. HERD_VULKAN_MISSING is CMake's reason.
#include <string>

#include "util/error.h"
#include "vulkan/device_info.h"

namespace herd::vulkan {

bool built_with_vulkan() {
  return false;
}

std::vector<DeviceInfo> list_devices() {
  throw Error("vulkan", std::string("herd was built without Vulkan: ") + HERD_VULKAN_MISSING +
                            "; install them and rebuild");
}

double measure_copy_bandwidth_gbs(int) {
  list_devices();  // throws
  return 0;
}

}  // namespace herd::vulkan
