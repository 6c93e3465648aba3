// One Vulkan device opened for compute: its logical device, one compute queue, a command
// pool and a fence. Everything else of the runtime (buffers, pipelines, recorders) is made
// from a Context and must be destroyed before it.
// Thread-safety: one thread at a time submits to the queue (Vulkan's rule for a VkQueue).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "vulkan/device_info.h"
#include "vulkan/loader.h"

namespace herd::vulkan {

// The extension names a physical device offers.
std::vector<std::string> device_extensions(const Instance& instance, VkPhysicalDevice device);
// What list_devices() reports for one physical device.
DeviceInfo read_device_info(const Instance& instance, VkPhysicalDevice device, int index);

class Context {
 public:
  // Opens Vulkan device `index` (list_devices()'s order). Throws herd::Error("[vulkan] ...")
  // when there is no loader, no such device, or it has no compute queue.
  static std::unique_ptr<Context> create(int index = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  const Api& api() const { return instance_->api(); }
  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  VkCommandPool command_pool() const { return command_pool_; }
  const VkPhysicalDeviceMemoryProperties& memory() const { return memory_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }

  // Submits one recorded command buffer and waits until the device has run it. Throws
  // herd::Error naming the device on failure (VK_ERROR_DEVICE_LOST included).
  void submit_and_wait(VkCommandBuffer commands);
  // A one-off command buffer: begin, record(commands), submit_and_wait, free.
  template <typename Record>
  void run_once(Record&& record) {
    VkCommandBuffer commands = begin_once();
    try {
      record(commands);
      end_once(commands);
    } catch (...) {
      api().vkFreeCommandBuffers(device_, command_pool_, 1, &commands);
      throw;
    }
  }

 private:
  Context() = default;
  VkCommandBuffer begin_once();
  void end_once(VkCommandBuffer commands);  // submits, waits and frees

  std::shared_ptr<Instance> instance_;
  DeviceInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkPhysicalDeviceLimits limits_{};
  VkDevice device_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace herd::vulkan
