#include "vulkan/context.h"

#include <limits>

#include "util/error.h"

namespace herd::vulkan {

namespace {

// A compute queue family: one with compute and, where one exists, without graphics (an
// asynchronous compute queue on discrete GPUs), else the first with compute.
uint32_t compute_family(const Instance& instance, VkPhysicalDevice device,
                        const std::string& name) {
  const Api& api = instance.api();
  uint32_t n_families = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(device, &n_families, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_families);
  api.vkGetPhysicalDeviceQueueFamilyProperties(device, &n_families, families.data());
  uint32_t family = std::numeric_limits<uint32_t>::max();
  for (uint32_t f = 0; f < n_families; ++f) {
    if (!(families[f].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (family == std::numeric_limits<uint32_t>::max() ||
        !(families[f].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
      family = f;
    }
  }
  if (family == std::numeric_limits<uint32_t>::max()) {
    throw Error("vulkan", name + ": the device has no compute queue");
  }
  return family;
}

}  // namespace

std::unique_ptr<Context> Context::create(int index) {
  std::unique_ptr<Context> self(new Context());
  self->instance_ = Instance::shared();
  const Api& api = self->instance_->api();
  const std::vector<VkPhysicalDevice> devices = self->instance_->physical_devices();
  if (devices.empty()) {
    throw Error("vulkan",
                "the Vulkan loader reports no device: install a driver "
                "(mesa-vulkan-drivers has lavapipe, a CPU driver; scripts/install-deps)");
  }
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    throw Error("vulkan", "no device vulkan:" + std::to_string(index) + " (this machine has " +
                              std::to_string(devices.size()) + "; herd devices lists them)");
  }
  self->physical_ = devices[static_cast<size_t>(index)];
  self->info_ = read_device_info(*self->instance_, self->physical_, index);
  api.vkGetPhysicalDeviceMemoryProperties(self->physical_, &self->memory_);
  VkPhysicalDeviceProperties properties{};
  api.vkGetPhysicalDeviceProperties(self->physical_, &properties);
  self->limits_ = properties.limits;

  const uint32_t family = compute_family(*self->instance_, self->physical_, self->info_.name);
  self->queue_family_ = family;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  // MoltenVK's devices require their portability extension to be enabled when offered.
  std::vector<const char*> extensions;
  for (const std::string& e : device_extensions(*self->instance_, self->physical_)) {
    if (e == "VK_KHR_portability_subset") extensions.push_back("VK_KHR_portability_subset");
  }
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check(api.vkCreateDevice(self->physical_, &info, nullptr, &self->device_),
        self->info_.name + ": vkCreateDevice");
  api.vkGetDeviceQueue(self->device_, family, 0, &self->queue_);

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = family;
  check(api.vkCreateCommandPool(self->device_, &pool, nullptr, &self->command_pool_),
        self->info_.name + ": vkCreateCommandPool");
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(api.vkCreateFence(self->device_, &fence, nullptr, &self->fence_),
        self->info_.name + ": vkCreateFence");
  return self;
}

Context::~Context() {
  if (device_ == VK_NULL_HANDLE) return;
  const Api& a = api();
  a.vkDeviceWaitIdle(device_);
  if (fence_ != VK_NULL_HANDLE) a.vkDestroyFence(device_, fence_, nullptr);
  if (command_pool_ != VK_NULL_HANDLE) a.vkDestroyCommandPool(device_, command_pool_, nullptr);
  a.vkDestroyDevice(device_, nullptr);
}

void Context::submit_and_wait(VkCommandBuffer commands) {
  const Api& a = api();
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  check(a.vkQueueSubmit(queue_, 1, &submit, fence_), info_.name + ": vkQueueSubmit");
  const VkResult waited = a.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  a.vkResetFences(device_, 1, &fence_);
  check(waited, info_.name + ": waiting for the device");
}

VkCommandBuffer Context::begin_once() {
  const Api& a = api();
  VkCommandBufferAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate.commandPool = command_pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  check(a.vkAllocateCommandBuffers(device_, &allocate, &commands),
        info_.name + ": vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  const VkResult result = a.vkBeginCommandBuffer(commands, &begin);
  if (result != VK_SUCCESS) a.vkFreeCommandBuffers(device_, command_pool_, 1, &commands);
  check(result, info_.name + ": vkBeginCommandBuffer");
  return commands;
}

void Context::end_once(VkCommandBuffer commands) {
  check(api().vkEndCommandBuffer(commands), info_.name + ": vkEndCommandBuffer");
  submit_and_wait(commands);
  api().vkFreeCommandBuffers(device_, command_pool_, 1, &commands);
}

}  // namespace herd::vulkan
