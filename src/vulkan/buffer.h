// Device memory: one VkBuffer with its own allocation (a weight tensor, an activation, a
// staging area). Sizes are rounded up to 4 bytes, so that shaders read quant blocks as
// 32-bit words. Move-only: a buffer can hold gigabytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "vulkan/context.h"

namespace herd::vulkan {

enum class BufferKind {
  // Where shaders read and write. Device-local memory; on unified-memory devices memory
  // that is device-local and host-visible, mapped, so that uploads are plain copies.
  kDevice,
  // Host-visible, coherent memory for copies to and from device-local buffers.
  kStaging,
};

class Buffer {
 public:
  Buffer() = default;
  // Throws herd::Error("[vulkan] <device>: out of device memory: ...") naming the bytes
  // asked and the heap's size and budget when the device cannot hold it.
  Buffer(Context& context, size_t bytes, BufferKind kind, const std::string& what = "buffer");
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  size_t bytes() const { return bytes_; }  // as asked, before rounding
  // The CPU's view of the memory, or nullptr when the memory is not host-visible.
  uint8_t* mapped() const { return mapped_; }

 private:
  void release();
  Context* context_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  size_t bytes_ = 0;
  uint8_t* mapped_ = nullptr;
};

// dst[offset .. offset + bytes) = src. A mapped buffer is written in place; any other goes
// through a staging buffer and one copy on the queue (waited for).
void upload(Context& context, Buffer& dst, const void* src, size_t bytes, size_t offset = 0);
// dst = src[offset .. offset + bytes), likewise.
void download(Context& context, const Buffer& src, void* dst, size_t bytes, size_t offset = 0);

}  // namespace herd::vulkan
