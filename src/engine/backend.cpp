#include "engine/backend.h"

#include "model/arch.h"
#include "util/error.h"
#include "vulkan/device_choice.h"
#include "vulkan/device_info.h"

namespace herd::engine {

std::string device_name(const Device& device) {
  return device.kind == Device::kCpu ? "cpu" : "vulkan:" + std::to_string(device.index);
}

std::string vulkan_unsupported(const ArchSpec& arch, const HParams& hp, bool sliced) {
  if (sliced && arch.qk_norm && arch.qk_norm_whole_row) {
    return "a q/k norm over the whole row across tensor-parallel ranks";
  }
  // Each capability the forward pass on the device lacks, in the words a user reads.
  // DeepSeek V4's compressed attention and hyper-connections run on the device together
  // (vulkan_ds4.cpp), not one without the other.
  if (arch.hyper_connections && arch.attention != AttentionKind::kCompressed) {
    return "hyper-connections without compressed attention";
  }
  if (!arch.hyper_connections && arch.attention == AttentionKind::kCompressed) {
    return "compressed attention without hyper-connections";
  }
  if (sliced && arch.delta_net) {
    return "linear attention (Gated DeltaNet) across tensor-parallel ranks";
  }
  if (arch.attention == AttentionKind::kGqa && hp.head_dim != hp.head_dim_v) {
    return "keys and values of different sizes";
  }
  if (arch.attention == AttentionKind::kMla && hp.kv_lora_rank + hp.n_rot > 1024) {
    return "a latent wider than 1024";
  }
  if (hp.head_dim > 1024) return "heads wider than 1024";
  if (hp.n_expert > 512 || hp.n_expert_used > 64) return "more than 512 experts or 64 per token";
  return {};
}

uint64_t device_memory_bytes(const Device& device) {
  if (device.kind != Device::kVulkan) return 0;
  try {
    for (const vulkan::DeviceInfo& d : vulkan::list_devices()) {
      if (d.index == device.index) return d.device_local_bytes();
    }
  } catch (const Error&) {
  }
  return 0;
}

Device choose_device(const std::string& text, const ArchSpec& arch, const HParams& hp,
                     std::string* note) {
  const vulkan::DeviceChoice choice = vulkan::parse_device_choice(text);
  if (choice.kind == vulkan::DeviceChoice::kCpu) return {};
  if (choice.kind == vulkan::DeviceChoice::kVulkan) {
    return {Device::kVulkan, vulkan::resolve_vulkan_device(choice)};
  }
  std::vector<vulkan::DeviceInfo> devices;
  try {
    devices = vulkan::list_devices();
  } catch (const Error&) {
    return {};  // no loader, no driver, no device: the CPU, as on any machine without a GPU
  }
  for (const vulkan::DeviceInfo& d : devices) {
    if (d.type != vulkan::DeviceType::kDiscrete && d.type != vulkan::DeviceType::kIntegrated) {
      continue;
    }
    const std::string missing = vulkan_unsupported(arch, hp, false);
    if (missing.empty()) return {Device::kVulkan, d.index};
    if (note != nullptr) {
      *note = "vulkan:" + std::to_string(d.index) + " (" + d.name + ") cannot run " +
              std::string(arch.name) + " yet (" + missing + "): running on the CPU";
    }
    return {};
  }
  return {};
}

}  // namespace herd::engine
