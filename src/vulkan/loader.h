// The Vulkan loader, opened at run time: herd does not link libvulkan, so one binary runs
// on machines with and without it (a missing loader is an error of --device vulkan, not a
// failure to start). Instance owns the library, the VkInstance and the table of entry
// points every other part of the runtime calls through.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <vector>

namespace herd::vulkan {

// clang-format off
#define HERD_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceVersion)
#define HERD_VK_INSTANCE_FUNCTIONS(X) \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkGetPhysicalDeviceMemoryProperties2) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkEnumerateDeviceExtensionProperties) \
  X(vkCreateDevice)
// Device functions, through the loader's dispatch (one table serves every device).
#define HERD_VK_DEVICE_FUNCTIONS(X) \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkQueueSubmit) \
  X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) \
  X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) \
  X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) \
  X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) \
  X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkResetDescriptorPool) \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateDescriptorSetLayout) \
  X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateComputePipelines) \
  X(vkDestroyPipeline) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) \
  X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer)
// clang-format on

#define HERD_VK_MEMBER(name) PFN_##name name = nullptr;
struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  HERD_VK_GLOBAL_FUNCTIONS(HERD_VK_MEMBER)
  HERD_VK_INSTANCE_FUNCTIONS(HERD_VK_MEMBER)
  HERD_VK_DEVICE_FUNCTIONS(HERD_VK_MEMBER)
};
#undef HERD_VK_MEMBER

// Throws herd::Error("[vulkan] <what>: <VkResult name>") unless result is VK_SUCCESS.
void check(VkResult result, const std::string& what);
const char* result_name(VkResult result);

// The loader and one VkInstance (Vulkan 1.1), one per process: every Context and device
// listing shares it, and it lives until the process exits. Destroying it makes the loader
// unload the driver, and a driver may keep memory reachable only from its own globals
// (Debian's lavapipe, mesa 22.3.6-1+deb12u2, leaves 128 bytes so: the leak checker reports
// them once the library is gone); making an instance also costs a driver's start-up (LLVM
// for lavapipe) each time. Thread-safety: shared() may be called from any thread; the table
// is read-only once created.
class Instance {
 public:
  // Throws herd::Error("[vulkan] ...") when no loader can be opened or it refuses to make
  // an instance (the message names the library tried and what to install); a later call
  // tries again.
  static std::shared_ptr<Instance> shared();
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const Api& api() const { return api_; }
  VkInstance handle() const { return instance_; }
  std::vector<VkPhysicalDevice> physical_devices() const;

 private:
  Instance() = default;
  static std::shared_ptr<Instance> create();
  void* library_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  Api api_;
};

}  // namespace herd::vulkan
