// Records many dispatches into one command buffer and submits them once: the shape of a
// whole forward pass on the device (one decode step, one prefill chunk), where only the
// logits come back to the host. Between two commands it records a barrier, so that each
// reads what the ones before it wrote; the descriptor sets of a recording live in the
// recorder's own pools until the next begin().
//
//   Recorder r(context);
//   r.begin();
//   kernels.rms_norm(r, ...); kernels.matvec(r, ...); ...   // or r.dispatch(...) directly
//   r.submit_and_wait();     // may be called again: the same commands on the buffers' data
//
// Thread-safety: none; one recorder per thread, and one submission at a time per Context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/pipeline.h"

namespace herd::vulkan {

// A storage-buffer binding: bytes [offset, offset + bytes) of a buffer (bytes 0: to its end).
// REQUIRES: offset a multiple of the device's minStorageBufferOffsetAlignment.
struct Binding {
  Binding(const Buffer& b, size_t offset_ = 0, size_t bytes_ = 0)  // NOLINT: implicit
      : buffer(&b), offset(offset_), bytes(bytes_) {}
  const Buffer* buffer;
  size_t offset;
  size_t bytes;
};

class Recorder {
 public:
  explicit Recorder(Context& context);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Context& context() const { return context_; }

  // Starts a new recording, dropping the last one. REQUIRES: none of it is running.
  void begin();

  // Records `n_groups` workgroups of `pipeline` over `buffers` (bindings 0, 1, ... in
  // order) with `push` as its push constants. More groups than the device's limit in x are
  // laid out in x and y: a shader finds its linear group index as
  // gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x and skips indices past n_groups.
  void dispatch(const Pipeline& pipeline, std::initializer_list<Binding> buffers, const void* push,
                size_t push_bytes, uint64_t n_groups);
  template <typename Push>
  void dispatch(const Pipeline& pipeline, std::initializer_list<Binding> buffers, const Push& push,
                uint64_t n_groups) {
    dispatch(pipeline, buffers, &push, sizeof(Push), n_groups);
  }

  // Records a copy of `bytes` between buffers.
  void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
            size_t bytes);

  // Ends the recording (if not yet ended), submits it and waits for the device.
  void submit_and_wait();

  size_t n_dispatches() const { return n_dispatches_; }

 private:
  void barrier();  // orders everything recorded so far before what comes next
  VkDescriptorSet allocate_set(const Pipeline& pipeline);
  void add_pool();

  Context& context_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools_;  // grown when a recording needs more sets
  size_t pool_ = 0;                      // the pool sets come from now
  bool recording_ = false;
  bool ended_ = false;
  size_t n_commands_ = 0;  // since the last barrier
  size_t n_dispatches_ = 0;
};

}  // namespace herd::vulkan
