#include "vulkan/buffer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <utility>

#include "util/error.h"

namespace herd::vulkan {
namespace {

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// The first memory type allowed by `type_bits` with every flag of `want`, or -1.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& memory, uint32_t type_bits,
                     VkMemoryPropertyFlags want) {
  for (uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    if ((type_bits & (1u << t)) && (memory.memoryTypes[t].propertyFlags & want) == want) {
      return static_cast<int>(t);
    }
  }
  return -1;
}

// The memory type for a kind, best first: what it wants, then what it can live with.
int choose_memory_type(const Context& context, uint32_t type_bits, BufferKind kind) {
  constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags kHost =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags device_choices[] = {
      context.info().unified_memory ? kLocal | kHost : kLocal, kLocal, kHost};
  const VkMemoryPropertyFlags staging_choices[] = {kHost | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                                   kHost, kHost, kHost};
  const std::span<const VkMemoryPropertyFlags> choices =
      kind == BufferKind::kDevice ? std::span<const VkMemoryPropertyFlags>(device_choices)
                                  : std::span<const VkMemoryPropertyFlags>(staging_choices);
  for (const VkMemoryPropertyFlags want : choices) {
    const int type = find_memory_type(context.memory(), type_bits, want);
    if (type >= 0) return type;
  }
  return -1;
}

// The largest device-local heap: the one a failed buffer would have gone to.
uint32_t largest_heap(const Context& context) {
  uint32_t best = 0;
  const VkPhysicalDeviceMemoryProperties& m = context.memory();
  for (uint32_t h = 0; h < m.memoryHeapCount; ++h) {
    if ((m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        m.memoryHeaps[h].size > m.memoryHeaps[best].size) {
      best = h;
    }
  }
  return best;
}

[[noreturn]] void out_of_memory(const Context& context, const std::string& what, size_t bytes,
                                uint32_t heap_index, const std::string& why) {
  const DeviceInfo& info = context.info();
  std::string heap = "heap " + std::to_string(heap_index);
  if (heap_index < info.heaps.size()) {
    const MemoryHeap& h = info.heaps[heap_index];
    heap += " holds " + mib(h.bytes);
    if (h.budget != 0) heap += ", " + mib(h.budget) + " of it available to herd";
  }
  throw Error("vulkan", info.name + ": out of device memory: " + what + " asked " + mib(bytes) +
                            " (" + std::to_string(bytes) + " bytes); " + heap + " (" + why + ")");
}

}  // namespace

Buffer::Buffer(Context& context, size_t bytes, BufferKind kind, const std::string& what)
    : context_(&context), bytes_(bytes) {
  const Api& api = context.api();
  const VkDevice device = context.device();
  const size_t rounded = (std::max<size_t>(bytes, 4) + 3) / 4 * 4;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = rounded;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const VkResult created = api.vkCreateBuffer(device, &info, nullptr, &buffer_);
  if (created == VK_ERROR_OUT_OF_DEVICE_MEMORY || created == VK_ERROR_OUT_OF_HOST_MEMORY) {
    out_of_memory(context, what, bytes, largest_heap(context), result_name(created));
  }
  check(created, context.info().name + ": vkCreateBuffer of " + std::to_string(rounded) +
                     " bytes for " + what);
  VkMemoryRequirements needs{};
  api.vkGetBufferMemoryRequirements(device, buffer_, &needs);
  const int type = choose_memory_type(context, needs.memoryTypeBits, kind);
  if (type < 0) {
    release();
    throw Error("vulkan", context.info().name + ": no memory type for " + what);
  }
  const uint32_t heap = context.memory().memoryTypes[type].heapIndex;
  // Asked more than the heap or one allocation can ever hold: say so before the driver
  // tries (some drivers take a long time to fail, or succeed and fail on first use).
  const uint64_t heap_bytes = context.memory().memoryHeaps[heap].size;
  if (needs.size > heap_bytes) {
    release();
    out_of_memory(context, what, bytes, heap, "more than the heap holds");
  }
  if (context.info().max_allocation != 0 && needs.size > context.info().max_allocation) {
    release();
    out_of_memory(context, what, bytes, heap,
                  "one allocation holds at most " + mib(context.info().max_allocation));
  }
  VkMemoryAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  allocate.allocationSize = needs.size;
  allocate.memoryTypeIndex = static_cast<uint32_t>(type);
  const VkResult result = api.vkAllocateMemory(device, &allocate, nullptr, &memory_);
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    release();
    out_of_memory(context, what, bytes, heap, result_name(result));
  }
  if (result != VK_SUCCESS) release();
  check(result, context.info().name + ": vkAllocateMemory for " + what);
  check(api.vkBindBufferMemory(device, buffer_, memory_, 0),
        context.info().name + ": vkBindBufferMemory");
  if (context.memory().memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    void* pointer = nullptr;
    check(api.vkMapMemory(device, memory_, 0, VK_WHOLE_SIZE, 0, &pointer),
          context.info().name + ": vkMapMemory");
    mapped_ = static_cast<uint8_t*>(pointer);
  }
}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& other) noexcept {
  *this = std::move(other);
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    context_ = std::exchange(other.context_, nullptr);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::release() {
  if (context_ == nullptr) return;
  const Api& api = context_->api();
  if (buffer_ != VK_NULL_HANDLE) api.vkDestroyBuffer(context_->device(), buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) api.vkFreeMemory(context_->device(), memory_, nullptr);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

void upload(Context& context, Buffer& dst, const void* src, size_t bytes, size_t offset) {
  HERD_CHECK_MSG(
      offset + bytes <= dst.bytes(),
      std::to_string(offset) + " + " + std::to_string(bytes) + " > " + std::to_string(dst.bytes()));
  if (bytes == 0) return;
  if (dst.mapped() != nullptr) {
    std::memcpy(dst.mapped() + offset, src, bytes);
    return;
  }
  Buffer staging(context, bytes, BufferKind::kStaging, "staging");
  std::memcpy(staging.mapped(), src, bytes);
  context.run_once([&](VkCommandBuffer commands) {
    const VkBufferCopy region{0, offset, bytes};
    context.api().vkCmdCopyBuffer(commands, staging.handle(), dst.handle(), 1, &region);
  });
}

void download(Context& context, const Buffer& src, void* dst, size_t bytes, size_t offset) {
  HERD_CHECK_MSG(
      offset + bytes <= src.bytes(),
      std::to_string(offset) + " + " + std::to_string(bytes) + " > " + std::to_string(src.bytes()));
  if (bytes == 0) return;
  if (src.mapped() != nullptr) {
    std::memcpy(dst, src.mapped() + offset, bytes);
    return;
  }
  Buffer staging(context, bytes, BufferKind::kStaging, "staging");
  context.run_once([&](VkCommandBuffer commands) {
    const VkBufferCopy region{offset, 0, bytes};
    context.api().vkCmdCopyBuffer(commands, src.handle(), staging.handle(), 1, &region);
    // The copy's writes are made visible to the host's reads after the fence.
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    context.api().vkCmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0,
                                       nullptr);
  });
  std::memcpy(dst, staging.mapped(), bytes);
}

}  // namespace herd::vulkan
