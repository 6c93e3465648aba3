#include "vulkan/pipeline.h"

#include <vector>

#include "util/error.h"
#include "vulkan/shaders.h"

namespace herd::vulkan {

void Pipeline::create(const PipelineOptions& options) {
  Context& context = context_;
  const Api& api = context.api();
  const VkDevice device = context.device();
  const std::string where = context.info().name + ": " + name_;
  HERD_CHECK_MSG(push_bytes_ <= context.limits().maxPushConstantsSize && push_bytes_ % 4 == 0,
                 name_ + ": " + std::to_string(push_bytes_) + " bytes of push constants");
  const std::vector<uint32_t> spirv = shader_spirv(name_);

  std::vector<VkDescriptorSetLayoutBinding> bindings(n_buffers_);
  for (uint32_t b = 0; b < n_buffers_; ++b) {
    bindings[b].binding = b;
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = n_buffers_;
  set_info.pBindings = bindings.data();
  check(api.vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout_),
        where + ": vkCreateDescriptorSetLayout");

  const VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes_};
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = push_bytes_ > 0 ? 1 : 0;
  layout_info.pPushConstantRanges = &push;
  check(api.vkCreatePipelineLayout(device, &layout_info, nullptr, &layout_),
        where + ": vkCreatePipelineLayout");

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = spirv.size() * sizeof(uint32_t);
  module_info.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(api.vkCreateShaderModule(device, &module_info, nullptr, &module),
        where + ": vkCreateShaderModule");

  std::vector<VkSpecializationMapEntry> entries(options.spec_constants.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i * sizeof(uint32_t)),
                  sizeof(uint32_t)};
  }
  VkSpecializationInfo specialization{};
  specialization.mapEntryCount = static_cast<uint32_t>(entries.size());
  specialization.pMapEntries = entries.data();
  specialization.dataSize = options.spec_constants.size() * sizeof(uint32_t);
  specialization.pData = options.spec_constants.data();

  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = entries.empty() ? nullptr : &specialization;
  info.layout = layout_;
  const VkResult result =
      api.vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline_);
  api.vkDestroyShaderModule(device, module, nullptr);
  check(result, where + ": vkCreateComputePipelines");
}

Pipeline::Pipeline(Context& context, const PipelineOptions& options)
    : context_(context),
      name_(options.shader),
      n_buffers_(options.n_buffers),
      push_bytes_(options.push_bytes) {
  try {
    create(options);
  } catch (...) {
    release();  // a throwing constructor runs no destructor
    throw;
  }
}

Pipeline::~Pipeline() {
  release();
}

void Pipeline::release() {
  const Api& api = context_.api();
  const VkDevice device = context_.device();
  if (pipeline_ != VK_NULL_HANDLE) api.vkDestroyPipeline(device, pipeline_, nullptr);
  if (layout_ != VK_NULL_HANDLE) api.vkDestroyPipelineLayout(device, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) api.vkDestroyDescriptorSetLayout(device, set_layout_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
}

}  // namespace herd::vulkan
