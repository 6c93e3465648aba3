// A compute pipeline from embedded SPIR-V: its storage-buffer bindings (0..n_buffers-1,
// in the shader's binding order), one push-constant block, and specialization constants
// (constant_id 0..n-1: the shaders' workgroup size, subgroup size, rows per workgroup).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "vulkan/context.h"

namespace herd::vulkan {

struct PipelineOptions {
  std::string shader;                        // the embedded shader's name
  uint32_t n_buffers = 0;                    // storage buffers at bindings 0 .. n_buffers-1
  uint32_t push_bytes = 0;                   // size of the push-constant block
  std::span<const uint32_t> spec_constants;  // value of constant_id i at [i]
};

class Pipeline {
 public:
  // Throws herd::Error("[vulkan] <device>: <shader>: ...") when the driver refuses it.
  Pipeline(Context& context, const PipelineOptions& options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const std::string& name() const { return name_; }
  uint32_t n_buffers() const { return n_buffers_; }
  uint32_t push_bytes() const { return push_bytes_; }
  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  void create(const PipelineOptions& options);
  void release();
  Context& context_;
  std::string name_;
  uint32_t n_buffers_ = 0;
  uint32_t push_bytes_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace herd::vulkan
