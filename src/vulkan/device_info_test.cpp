// Device enumeration and --device parsing.
#include "vulkan/device_info.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdio>

#include "util/error.h"
#include "vulkan/device_choice.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

TEST(VulkanDevices, ListsTheTestDeviceWithItsMemoryAndSubgroups) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const std::vector<DeviceInfo> devices = list_devices();
  ASSERT_FALSE(devices.empty());
  const DeviceInfo& d = devices[static_cast<size_t>(context.info().index)];
  EXPECT_EQ(d.name, context.info().name);
  EXPECT_FALSE(d.name.empty());
  EXPECT_FALSE(d.driver.empty());
  ASSERT_FALSE(d.heaps.empty());
  EXPECT_GT(d.device_local_bytes(), 0u);
  EXPECT_GT(d.subgroup_size, 0u);
  EXPECT_TRUE(std::has_single_bit(d.subgroup_size)) << d.subgroup_size;
  EXPECT_GE(d.max_workgroup_size, 128u);  // Vulkan's minimum
  for (size_t i = 0; i < devices.size(); ++i) EXPECT_EQ(devices[i].index, static_cast<int>(i));
  const std::string text = describe(d);
  EXPECT_NE(text.find(d.name), std::string::npos) << text;
  EXPECT_NE(text.find("device-local"), std::string::npos) << text;
  std::printf("%s", text.c_str());
  if (d.type == DeviceType::kCpu) {
    EXPECT_TRUE(d.unified_memory);  // lavapipe
  }
}

TEST(VulkanDevices, ParsesDeviceChoices) {
  EXPECT_EQ(parse_device_choice("auto").kind, DeviceChoice::kAuto);
  EXPECT_EQ(parse_device_choice("cpu").kind, DeviceChoice::kCpu);
  EXPECT_EQ(parse_device_choice("vulkan").kind, DeviceChoice::kVulkan);
  EXPECT_EQ(parse_device_choice("vulkan").index, -1);
  const DeviceChoice two = parse_device_choice("vulkan:2");
  EXPECT_EQ(two.kind, DeviceChoice::kVulkan);
  EXPECT_EQ(two.index, 2);
  for (const char* bad : {"cuda", "vulkan:", "vulkan:-1", "vulkan:1x", "VULKAN", ""}) {
    EXPECT_THROW(parse_device_choice(bad), Error) << bad;
  }
  try {
    parse_device_choice("metal");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[vulkan] --device 'metal'"), std::string::npos)
        << e.what();
  }
}

TEST(VulkanDevices, NamesTheDevicesWhenAnIndexIsOutOfRange) {
  HERD_TEST_VULKAN_CONTEXT(context);
  EXPECT_EQ(resolve_vulkan_device(parse_device_choice("vulkan")), 0);
  try {
    resolve_vulkan_device(parse_device_choice("vulkan:99"));
    FAIL();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("vulkan:99"), std::string::npos) << message;
    EXPECT_NE(message.find(context.info().name), std::string::npos) << message;
  }
  EXPECT_THROW(Context::create(99), Error);
}

}  // namespace
}  // namespace herd::vulkan
