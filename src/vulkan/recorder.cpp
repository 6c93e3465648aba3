#include "vulkan/recorder.h"

#include <algorithm>

#include "util/error.h"

namespace herd::vulkan {
namespace {

// Sets per pool, and storage-buffer descriptors per set on average: a forward pass of a
// large model records a few thousand dispatches, so a recording grows to a handful of pools.
constexpr uint32_t kSetsPerPool = 512;
constexpr uint32_t kBuffersPerSet = 4;

}  // namespace

Recorder::Recorder(Context& context) : context_(context) {
  VkCommandBufferAllocateInfo allocate{};
  allocate.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocate.commandPool = context.command_pool();
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  check(context.api().vkAllocateCommandBuffers(context.device(), &allocate, &commands_),
        context.info().name + ": vkAllocateCommandBuffers");
}

Recorder::~Recorder() {
  const Api& api = context_.api();
  for (VkDescriptorPool pool : pools_)
    api.vkDestroyDescriptorPool(context_.device(), pool, nullptr);
  api.vkFreeCommandBuffers(context_.device(), context_.command_pool(), 1, &commands_);
}

void Recorder::add_pool() {
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBuffersPerSet};
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = kSetsPerPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(context_.api().vkCreateDescriptorPool(context_.device(), &info, nullptr, &pool),
        context_.info().name + ": vkCreateDescriptorPool");
  pools_.push_back(pool);
}

void Recorder::begin() {
  const Api& api = context_.api();
  for (VkDescriptorPool pool : pools_) api.vkResetDescriptorPool(context_.device(), pool, 0);
  pool_ = 0;
  VkCommandBufferBeginInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  check(api.vkBeginCommandBuffer(commands_, &info),
        context_.info().name + ": vkBeginCommandBuffer");
  recording_ = true;
  ended_ = false;
  n_dispatches_ = 0;
  // What the host or an earlier submission wrote is visible to this one's commands.
  n_commands_ = 1;
  barrier();
}

void Recorder::barrier() {
  if (n_commands_ == 0) return;
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask =
      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  context_.api().vkCmdPipelineBarrier(commands_, stages | VK_PIPELINE_STAGE_HOST_BIT, stages, 0, 1,
                                      &b, 0, nullptr, 0, nullptr);
  n_commands_ = 0;
}

VkDescriptorSet Recorder::allocate_set(const Pipeline& pipeline) {
  const VkDescriptorSetLayout layout = pipeline.set_layout();
  for (;;) {
    const bool fresh = pool_ == pools_.size();
    if (fresh) add_pool();
    VkDescriptorSetAllocateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    info.descriptorPool = pools_[pool_];
    info.descriptorSetCount = 1;
    info.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult result = context_.api().vkAllocateDescriptorSets(context_.device(), &info, &set);
    if (result == VK_SUCCESS) return set;
    if (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL) {
      check(result, context_.info().name + ": vkAllocateDescriptorSets");
    }
    HERD_CHECK_MSG(!fresh, pipeline.name() + ": a fresh descriptor pool cannot hold its set");
    ++pool_;  // this pool is full: the next (made if needed)
  }
}

void Recorder::dispatch(const Pipeline& pipeline, std::initializer_list<Binding> buffers,
                        const void* push, size_t push_bytes, uint64_t n_groups) {
  HERD_CHECK(recording_ && !ended_);
  HERD_CHECK_MSG(buffers.size() == pipeline.n_buffers() && push_bytes == pipeline.push_bytes(),
                 pipeline.name() + ": " + std::to_string(buffers.size()) + " buffers, " +
                     std::to_string(push_bytes) + " push bytes");
  const Api& api = context_.api();
  const VkDescriptorSet set = allocate_set(pipeline);
  const VkDeviceSize alignment = context_.limits().minStorageBufferOffsetAlignment;
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers.size());
  for (const Binding& b : buffers) {
    HERD_CHECK_MSG(b.offset % alignment == 0 && b.offset + b.bytes <= b.buffer->bytes(),
                   pipeline.name() + ": binding at offset " + std::to_string(b.offset));
    // A whole buffer is bound with its 4-byte rounding, so word reads of its tail are in range.
    const uint64_t range = b.bytes != 0 ? b.bytes : (b.buffer->bytes() - b.offset + 3) / 4 * 4;
    if (range > context_.limits().maxStorageBufferRange) {
      throw Error("vulkan", context_.info().name + ": " + pipeline.name() + " binds " +
                                std::to_string(range) + " bytes; one binding holds at most " +
                                std::to_string(context_.limits().maxStorageBufferRange) +
                                " on this device (bind the tensor in parts)");
    }
    infos.push_back({b.buffer->handle(), b.offset, b.bytes == 0 ? VK_WHOLE_SIZE : b.bytes});
  }
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  api.vkUpdateDescriptorSets(context_.device(), static_cast<uint32_t>(writes.size()), writes.data(),
                             0, nullptr);

  barrier();
  api.vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  api.vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1,
                              &set, 0, nullptr);
  if (push_bytes > 0) {
    api.vkCmdPushConstants(commands_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<uint32_t>(push_bytes), push);
  }
  const uint64_t max_x = context_.limits().maxComputeWorkGroupCount[0];
  const uint64_t x = std::min<uint64_t>(std::max<uint64_t>(n_groups, 1), max_x);
  const uint64_t y = (n_groups + x - 1) / x;
  HERD_CHECK_MSG(y <= context_.limits().maxComputeWorkGroupCount[1],
                 pipeline.name() + ": " + std::to_string(n_groups) + " workgroups");
  if (n_groups > 0) {
    api.vkCmdDispatch(commands_, static_cast<uint32_t>(x), static_cast<uint32_t>(y), 1);
  }
  ++n_commands_;
  ++n_dispatches_;
}

void Recorder::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
                    size_t bytes) {
  HERD_CHECK(recording_ && !ended_);
  HERD_CHECK(src_offset + bytes <= src.bytes() && dst_offset + bytes <= dst.bytes());
  barrier();
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  context_.api().vkCmdCopyBuffer(commands_, src.handle(), dst.handle(), 1, &region);
  ++n_commands_;
}

void Recorder::submit_and_wait() {
  HERD_CHECK(recording_);
  const Api& api = context_.api();
  if (!ended_) {
    // Every write of the recording is made visible to the host after the fence.
    VkMemoryBarrier b{};
    b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    api.vkCmdPipelineBarrier(commands_,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
    check(api.vkEndCommandBuffer(commands_), context_.info().name + ": vkEndCommandBuffer");
    ended_ = true;
  }
  context_.submit_and_wait(commands_);
}

}  // namespace herd::vulkan
