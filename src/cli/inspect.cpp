// herd inspect --model M [--tensors]: what a GGUF file holds, without loading the model, and
// what each Vulkan device of this machine would hold of it.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/store_options.h"
#include "engine/backend.h"
#include "engine/device_placement.h"
#include "engine/runner.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "vulkan/device_info.h"

namespace herd::cli {
namespace {

std::string show_value(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::STRING: {
      std::string s(v.str.substr(0, 120));
      for (char& c : s) {
        if (c == '\n') c = ' ';
      }
      return "\"" + s +
             (v.str.size() > 120 ? "...\" (" + std::to_string(v.str.size()) + " bytes)" : "\"");
    }
    case ValueType::ARRAY:
      return "[" + std::string(gguf::value_type_name(v.elem_type)) + " x " +
             std::to_string(v.count) + "]";
    case ValueType::F32:
    case ValueType::F64:
      return std::to_string(v.f);
    case ValueType::BOOL:
      return v.u ? "true" : "false";
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return std::to_string(v.i);
    default:
      return std::to_string(v.u);
  }
}

const char* attention_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kGqa:
      return "grouped-query attention";
    case AttentionKind::kMla:
      return "multi-head latent attention";
    case AttentionKind::kCompressed:
      return "compressed attention (one latent K = V head)";
  }
  return "?";
}

const char* gating_name(Gating g) {
  switch (g) {
    case Gating::kSoftmax:
      return "softmax";
    case Gating::kSigmoid:
      return "sigmoid";
    case Gating::kSqrtSoftplus:
      return "sqrt-softplus";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kSilu:
      return "SwiGLU";
    case Activation::kGeluTanh:
      return "GeGLU (tanh)";
    case Activation::kSwigluOai:
      return "gpt-oss SwiGLU (clamped)";
  }
  return "?";
}

const char* scaling_name(RopeScaling r) {
  return r == RopeScaling::kYarn ? "YaRN" : r == RopeScaling::kLinear ? "linear" : "none";
}

// The attention's parts beyond its kind: biases, q/k norm, which dimensions rope turns and
// how, and what a file carries that the forward pass keeps but does not run.
std::string attention_details(const ArchSpec& arch, const HParams& hp) {
  std::string text = arch.rope_style == RopeStyle::kNeoxHalves ? "rope NeoX" : "rope GPT-J";
  text += hp.n_rot < hp.head_dim ? " on " + std::to_string(hp.n_rot) + " of " +
                                       std::to_string(hp.head_dim) + " key dims"
                                 : " on every dim";
  if (arch.attention == AttentionKind::kCompressed && hp.n_rot < hp.head_dim) text += " (the last)";
  if (arch.qkv_bias) text += ", q/k/v biases";
  if (arch.qk_norm && hp.qk_norm_absent) {
    text += ", no q/k norm (this file has none)";
  } else if (arch.qk_norm) {
    text += arch.qk_norm_whole_row ? ", q/k RMSNorm over the whole row (all heads)"
                                   : ", q/k RMSNorm per head";
  }
  if (arch.attn_sinks) text += ", sinks";
  if (arch.dsa_indexer) {
    text += "; DSA indexer " + std::to_string(hp.n_indexer_head) + " heads of " +
            std::to_string(hp.indexer_head_dim) + ", top " + std::to_string(hp.indexer_top_k) +
            ": kept, not run (dense attention, as the reference by default)";
  }
  return text;
}

// One line per run of layers with the same options: what the forward pass will do.
std::string layer_text(const ArchSpec& arch, const HParams& hp, const LayerOptions& o) {
  std::string text;
  if (o.moe && arch.moe_beside_dense) text = "dense FFN " + std::to_string(o.n_ff) + " beside ";
  if (o.moe) {
    text += "MoE " + std::to_string(hp.n_expert) + " experts of " + std::to_string(hp.n_ff_expert) +
            " (" + std::to_string(hp.n_expert_used) + " used";
    if (hp.n_expert_shared > 0) text += ", " + std::to_string(hp.n_expert_shared) + " shared";
    text += std::string(", ") + gating_name(hp.gating) + " router";
    if (o.hash_routed) text += " (experts by token id)";
    if (hp.swiglu_limit > 0) {
      char clamp[48];
      std::snprintf(clamp, sizeof clamp, ", SwiGLU clamped at %g",
                    static_cast<double>(hp.swiglu_limit));
      text += clamp;
    }
    if (hp.n_expert_group > 1) {
      text += ", " + std::to_string(hp.n_expert_group_used) + " of " +
              std::to_string(hp.n_expert_group) + " groups";
    }
    text += ")";
  } else {
    text = "dense FFN " + std::to_string(o.n_ff);
  }
  if (o.nextn) text = "NextN (MTP) block, kept, not run: " + text;
  if (o.linear) {
    return text + ", Gated DeltaNet (" + std::to_string(hp.delta_n_k_heads) + " key heads, " +
           std::to_string(hp.delta_n_v_heads) + " value heads " +
           (arch.delta_v_tiled ? "tiled" : "grouped") + ", head " +
           std::to_string(hp.delta_head_k) + "/" + std::to_string(hp.delta_head_v) + ", conv " +
           std::to_string(hp.delta_conv_kernel) + ")";
  }
  if (arch.attn_output_gate) text += ", gated";
  text +=
      o.sliding ? ", sliding window " + std::to_string(hp.sliding_window) : ", global attention";
  if (o.compress_ratio > 0) {
    text += o.compress_indexed
                ? " + top " + std::to_string(hp.indexer_top_k) + " indexed entries of " +
                      std::to_string(o.compress_ratio) + " overlapping positions (CSA)"
                : " + every entry of " + std::to_string(o.compress_ratio) + " positions (HCA)";
  }
  if (arch.layer_shapes) {
    // The attention shapes differ per layer: say this one's.
    text += " (" + std::to_string(o.n_head_kv) + " KV heads of " + std::to_string(o.head_dim);
    if (!o.own_kv) text += ", reads layer " + std::to_string(o.kv_layer) + "'s keys and values";
    if (o.own_kv && !o.has_v) text += ", V = K";
    text += ")";
  }
  if (hp.n_embd_per_layer > 0 && !o.nextn) {
    text += ", per-layer input " + std::to_string(hp.n_embd_per_layer);
  }
  char rope[96];
  std::snprintf(rope, sizeof rope, ", rope base %g %s", static_cast<double>(o.rope_base),
                scaling_name(o.rope_scaling));
  text += rope;
  if (o.rope_scaling != RopeScaling::kNone) {
    std::snprintf(rope, sizeof rope, " x%g", static_cast<double>(hp.rope_factor));
    text += rope;
  }
  return text;
}

void print_model_plan(const gguf::File& file) {
  ModelInfo info;
  try {
    info = read_model_info(file);
  } catch (const std::exception& e) {
    std::printf("model: not runnable by herd: %s\n", e.what());
    return;
  }
  const ArchSpec& arch = *info.arch;
  const HParams& hp = info.hp;
  std::printf(
      "model: %s, %s, %s norms, %s; %lld layers, embd %lld, %lld heads (%lld KV), "
      "head %lld/%lld, rope %lld dims\n",
      std::string(arch.name).c_str(), attention_name(arch.attention),
      arch.norm == NormPlacement::kSandwich ? "sandwich" : "pre", activation_name(arch.activation),
      static_cast<long long>(hp.n_layer), static_cast<long long>(hp.n_embd),
      static_cast<long long>(hp.n_head), static_cast<long long>(hp.n_head_kv),
      static_cast<long long>(hp.head_dim), static_cast<long long>(hp.head_dim_v),
      static_cast<long long>(hp.n_rot));
  if (hp.final_softcap > 0) {
    std::printf("  logits soft-capped at %g\n", static_cast<double>(hp.final_softcap));
  }
  if (arch.attention == AttentionKind::kMla) {
    std::printf("  latent %lld + rope %lld cached per token per layer, q LoRA rank %lld\n",
                static_cast<long long>(hp.kv_lora_rank), static_cast<long long>(hp.n_rot),
                static_cast<long long>(hp.q_lora_rank));
  }
  std::printf("  attention: %s\n", attention_details(arch, hp).c_str());
  if (arch.hyper_connections) {
    std::printf("  residual: %lld hyper-connection streams (Sinkhorn %lld rounds)\n",
                static_cast<long long>(hp.n_hc), static_cast<long long>(hp.hc_sinkhorn_iters));
  }
  int64_t begin = 0;
  std::string run = layer_text(arch, hp, layer_options(arch, hp, 0));
  const int64_t n_blocks = hp.n_layer + hp.n_nextn;
  for (int64_t il = 1; il <= n_blocks; ++il) {
    const std::string text =
        il < n_blocks ? layer_text(arch, hp, layer_options(arch, hp, il)) : std::string();
    if (text == run) continue;
    const std::string range = il - begin == 1
                                  ? std::to_string(begin)
                                  : std::to_string(begin) + "-" + std::to_string(il - 1);
    std::printf("  layer %-9s %s\n", range.c_str(), run.c_str());
    begin = il;
    run = text;
  }
}

// Each Vulkan device of this machine and what it would hold of the model (device_placement.h,
// with a context of min(the model's, 4096) for one sequence): how the plan would place it.
void print_devices(const gguf::File& file) {
  std::vector<vulkan::DeviceInfo> devices;
  ModelInfo info;
  try {
    devices = vulkan::list_devices();
    info = read_model_info(file);
  } catch (const std::exception&) {
    return;  // no Vulkan device, or a file herd cannot run (said above)
  }
  const int64_t n_ctx = std::min(info.hp.n_ctx, engine::kDefaultMaxCtx);
  const engine::PartBytes part =
      engine::part_bytes(info, file, 0, info.hp.n_layer, true, true, n_ctx, 1);
  for (const vulkan::DeviceInfo& d : devices) {
    const std::string name = "vulkan:" + std::to_string(d.index);
    std::string holds;
    const std::string missing = engine::vulkan_unsupported(*info.arch, info.hp, false);
    if (!missing.empty()) {
      holds = "cannot run it yet (" + missing + ")";
    } else {
      const engine::DevicePlacement p =
          engine::place_on_device(part, d.device_local_bytes(), engine::kDeviceHeadroom,
                                  engine::ExpertsChoice::kAuto, -1, name);
      holds = p.kind == engine::DevicePlacement::kDevice ? "holds all of it"
              : p.kind == engine::DevicePlacement::kExpertsOnCpu
                  ? "holds all but the routed experts (those on the CPU)"
                  : "holds its first " + std::to_string(p.device_layers) + " of " +
                        std::to_string(info.hp.n_layer) + " layers (the rest on the CPU)";
    }
    std::printf("device %s: %s (%s), %.2f GiB device-local: %s\n", name.c_str(), d.name.c_str(),
                vulkan::device_type_name(d.type),
                static_cast<double>(d.device_local_bytes()) / (1 << 30), holds.c_str());
  }
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a GGUF file's metadata and tensors");
  auto model = std::make_shared<std::string>();
  auto tensors = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model, "GGUF file, or org/repo[:QUANT] (herd pull)")->required();
  cmd->add_flag("--tensors", *tensors, "List every tensor");
  cmd->callback([model, tensors] {
    gguf::File file = gguf::File::open(resolve_model_arg(*model));
    std::printf("GGUF v%u, %zu metadata entries, %zu tensors, data at %zu\n", file.version(),
                file.metadata().size(), file.tensors().size(), file.data_offset());
    if (file.n_files() > 1) {
      std::printf("split in %zu files:\n", file.n_files());
      for (const std::string& path : file.paths()) std::printf("  %s\n", path.c_str());
    }
    for (const auto& [key, value] : file.metadata()) {
      std::printf("  %-40.*s %s\n", static_cast<int>(key.size()), key.data(),
                  show_value(value).c_str());
    }
    uint64_t total = 0;
    for (const gguf::TensorInfo& t : file.tensors()) total += t.n_bytes;
    std::printf("tensor data: %.2f MiB\n", static_cast<double>(total) / (1 << 20));
    print_model_plan(file);
    print_devices(file);
    if (!*tensors) return;
    for (const gguf::TensorInfo& t : file.tensors()) {
      std::string shape;
      for (int64_t d : t.shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
      std::printf("  %-40.*s %-6s [%s] %zu bytes\n", static_cast<int>(t.name.size()), t.name.data(),
                  std::string(type_traits(t.type).name).c_str(), shape.c_str(), t.n_bytes);
    }
  });
}

}  // namespace herd::cli
