#include "model/model_info.h"

#include <algorithm>

#include "util/error.h"

namespace herd {
namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& what) {
  throw Error("model", "'" + f.origin() + "': " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Gemma 4's per-layer shapes (ArchSpec::layer_shapes); head_count_kv and feed_forward_length
// arrays are read with the other sizes.
void read_layer_shapes(const gguf::File& f, const std::string& a, HParams& hp) {
  const std::string pattern = a + "attention.sliding_window_pattern";
  if (!f.has(pattern)) fail(f, "missing '" + pattern + "' (which layers are sliding-window)");
  const std::vector<int32_t> swa = f.get_i32_array(pattern);
  if (static_cast<int64_t>(swa.size()) != hp.n_layer + hp.n_nextn) {
    fail(f, "'" + pattern + "' has " + std::to_string(swa.size()) + " values for " +
                std::to_string(hp.n_layer + hp.n_nextn) + " layers");
  }
  for (int32_t x : swa) hp.swa_layers.push_back(x != 0 ? 1 : 0);
  if (hp.sliding_window == 0) fail(f, "missing '" + a + "attention.sliding_window'");
  auto size = [&](const std::string& key, int64_t fallback, uint64_t least = 1) {
    const std::optional<uint64_t> v = f.get_u64_opt(key);
    if (!v) return fallback;
    if (*v < least || *v > 65536)
      fail(f, "'" + key + "' = " + std::to_string(*v) + " is out of range");
    return static_cast<int64_t>(*v);
  };
  hp.head_dim_swa = size(a + "attention.key_length_swa", hp.head_dim);
  if (size(a + "attention.value_length_swa", hp.head_dim_swa) != hp.head_dim_swa) {
    fail(f, "different key and value head sizes are not supported for grouped-query attention");
  }
  hp.n_rot_swa = size(a + "rope.dimension_count_swa", hp.head_dim_swa);
  if (hp.n_rot_swa != hp.head_dim_swa || hp.head_dim_swa % 2 != 0) {
    fail(f, "the sliding layers' rope.dimension_count_swa " + std::to_string(hp.n_rot_swa) +
                " must equal their even key size " + std::to_string(hp.head_dim_swa));
  }
  hp.rope_base_swa = f.get_f32_opt(a + "rope.freq_base_swa").value_or(0.0f);
  const std::string per_layer = a + "embedding_length_per_layer_input";
  if (!f.has(per_layer)) fail(f, "missing '" + per_layer + "'");
  hp.n_embd_per_layer = size(per_layer, 0, 0);
  hp.n_kv_shared =
      static_cast<int64_t>(f.get_u64_opt(a + "attention.shared_kv_layers").value_or(0));
  if (hp.n_kv_shared >= hp.n_layer) {
    fail(f, "attention.shared_kv_layers " + std::to_string(hp.n_kv_shared) +
                " leaves no layer of the " + std::to_string(hp.n_layer) + " with its own cache");
  }
}

// What the file's tensors say of the per-layer shapes (Gemma 4's global layers without
// attn_v), and whether every shared-KV layer has a layer to read.
void check_layer_shapes(const gguf::File& f, const ArchSpec& arch, HParams& hp) {
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerOptions lo = layer_options(arch, hp, il);
    if (!lo.own_kv && lo.kv_layer < 0) {
      fail(f, "layer " + std::to_string(il) + " shares the keys and values of an earlier " +
                  (lo.sliding ? "sliding" : "global") + " layer, and there is none");
    }
    const std::string blk = "blk." + std::to_string(il) + ".";
    if (lo.sliding || !lo.own_kv || f.find_tensor(blk + "attn_k.weight") == nullptr) continue;
    hp.global_v_is_k = f.find_tensor(blk + "attn_v.weight") == nullptr;
    break;
  }
}

}  // namespace

namespace {

// DeepSeek V4's compressed attention and hyper-connections (README of
// ../shared/models/frontier2): the keys its reference requires.
void read_compressed_attention(const gguf::File& f, const std::string& a, bool partial,
                               HParams& hp) {
  auto positive = [&](const std::string& key) {
    const uint64_t v = f.get_u64(key);
    if (v == 0 || v > (1ull << 31))
      fail(f, "'" + key + "' = " + std::to_string(v) + " is out of range");
    return static_cast<int64_t>(v);
  };
  if (hp.n_head_kv != 1) fail(f, "compressed attention has one KV head (head_count_kv 1)");
  if (hp.head_dim > 512) fail(f, "compressed attention's key size is at most 512");
  if (hp.head_dim_v != hp.head_dim) fail(f, "compressed attention's values are its keys");
  if (hp.n_rot >= hp.head_dim || hp.n_rot % 2 != 0) {
    fail(f, "rope.dimension_count " + std::to_string(hp.n_rot) +
                " must be even and smaller than the key size " + std::to_string(hp.head_dim));
  }
  // The latent's size, from its norm (the file has no kv_lora_rank): the key size.
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const auto* norm = f.find_tensor("blk." + std::to_string(il) + ".attn_kv_a_norm.weight");
    if (norm == nullptr && partial) continue;
    if (norm == nullptr) fail(f, "missing tensor 'blk.0.attn_kv_a_norm.weight'");
    hp.kv_lora_rank = norm->shape[0];
    break;
  }
  if (hp.kv_lora_rank != 0 && hp.kv_lora_rank != hp.head_dim) {
    fail(f, "attn_kv_a_norm has " + std::to_string(hp.kv_lora_rank) + " values; the key size is " +
                std::to_string(hp.head_dim));
  }
  hp.q_lora_rank = positive(a + "attention.q_lora_rank");
  hp.sliding_window = positive(a + "attention.sliding_window");
  hp.n_out_group = positive(a + "attention.output_group_count");
  hp.o_lora_rank = positive(a + "attention.output_lora_rank");
  if ((hp.n_head * hp.head_dim) % hp.n_out_group != 0) {
    fail(f, "attention.output_group_count " + std::to_string(hp.n_out_group) +
                " does not divide the heads' outputs");
  }
  const std::vector<int32_t> ratios = f.get_i32_array(a + "attention.compress_ratios");
  // (A NextN block the converter appends may have its entry too.)
  if (static_cast<int64_t>(ratios.size()) < hp.n_layer) {
    fail(f, "attention.compress_ratios has " + std::to_string(ratios.size()) + " entries for " +
                std::to_string(hp.n_layer) + " layers");
  }
  hp.compress_ratios.clear();
  for (int32_t r : ratios) {
    if (r < 0 || r > (1 << 20)) fail(f, "compress ratio " + std::to_string(r) + " is out of range");
    hp.compress_ratios.push_back(r);
  }
  hp.compress_rope_base =
      f.get_f32_opt(a + "attention.compress_rope_freq_base").value_or(hp.rope_base);
  hp.n_indexer_head = positive(a + "attention.indexer.head_count");
  hp.indexer_head_dim = positive(a + "attention.indexer.key_length");
  hp.indexer_top_k = positive(a + "attention.indexer.top_k");
  if (hp.indexer_head_dim > 512 || (hp.indexer_head_dim & (hp.indexer_head_dim - 1)) != 0 ||
      hp.indexer_head_dim < hp.n_rot) {
    fail(f, "attention.indexer.key_length " + std::to_string(hp.indexer_head_dim) +
                " must be a power of two of at least the rope dims, at most 512");
  }
  hp.n_hc = positive(a + "hyper_connection.count");
  if (hp.n_hc > 8) fail(f, "hyper_connection.count is at most 8");
  hp.hc_sinkhorn_iters = positive(a + "hyper_connection.sinkhorn_iterations");
  hp.hc_eps = f.get_f32_opt(a + "hyper_connection.epsilon").value_or(1e-6f);
}

}  // namespace

ModelInfo read_model_info(const gguf::File& f, bool partial) {
  ModelInfo info;
  const std::string arch_name(f.get_string("general.architecture"));
  info.arch = find_arch(arch_name);
  if (info.arch == nullptr) {
    std::string known;
    for (auto a : arch_names()) known += (known.empty() ? "" : ", ") + std::string(a);
    fail(f, "architecture '" + arch_name + "' is not supported (supported: " + known + ")");
  }
  const ArchSpec& arch = *info.arch;
  const std::string a = arch_name + ".";
  HParams& hp = info.hp;
  auto positive = [&](const std::string& key) {
    uint64_t v = f.get_u64(key);
    if (v == 0 || v > (1ull << 31))
      fail(f, "'" + key + "' = " + std::to_string(v) + " is out of range");
    return static_cast<int64_t>(v);
  };
  hp.n_embd = positive(a + "embedding_length");
  hp.n_layer = positive(a + "block_count");
  // The NextN (MTP) blocks come last; the forward pass runs the ones before them.
  hp.n_nextn = static_cast<int64_t>(f.get_u64_opt(a + "nextn_predict_layers").value_or(0));
  if (hp.n_nextn >= hp.n_layer) {
    fail(f, "nextn_predict_layers " + std::to_string(hp.n_nextn) + " leaves no block of the " +
                std::to_string(hp.n_layer) + " to run");
  }
  hp.n_layer -= hp.n_nextn;
  hp.n_head = positive(a + "attention.head_count");
  // A per-layer key (Gemma 4's head_count_kv, feed_forward_length): a number, or an array
  // of one positive value per layer (then `per_layer` gets it; the result is the largest).
  auto number_or_layers = [&](const std::string& key, std::vector<int64_t>& per_layer) {
    const gguf::Value* v = f.find(key);
    if (v == nullptr || v->type != gguf::ValueType::ARRAY || !arch.layer_shapes) {
      return positive(key);
    }
    const std::vector<int32_t> values = f.get_i32_array(key);
    if (static_cast<int64_t>(values.size()) != hp.n_layer + hp.n_nextn) {
      fail(f, "'" + key + "' has " + std::to_string(values.size()) + " values for " +
                  std::to_string(hp.n_layer + hp.n_nextn) + " layers");
    }
    int64_t largest = 0;
    for (int32_t x : values) {
      if (x <= 0) fail(f, "'" + key + "' has a value " + std::to_string(x) + " out of range");
      per_layer.push_back(x);
      largest = std::max<int64_t>(largest, x);
    }
    return largest;
  };
  hp.n_head_kv = f.has(a + "attention.head_count_kv")
                     ? number_or_layers(a + "attention.head_count_kv", hp.n_head_kv_of)
                     : hp.n_head;
  hp.n_ctx = positive(a + "context_length");
  hp.rms_eps = f.get_f32_opt(a + "attention.layer_norm_rms_epsilon").value_or(arch.default_rms_eps);
  hp.rope_base = f.get_f32_opt(a + "rope.freq_base").value_or(arch.default_rope_base);
  const bool mla = arch.attention == AttentionKind::kMla;
  // Mainline's MLA converter stores the latent's sizes in key_length / value_length and the
  // per-head sizes under *_mla; the reference's own converter stores the per-head sizes.
  const bool mla_keys = mla && f.has(a + "attention.key_length_mla");
  const std::string k_key = a + (mla_keys ? "attention.key_length_mla" : "attention.key_length");
  const std::string v_key =
      a + (mla_keys ? "attention.value_length_mla" : "attention.value_length");
  if (f.has(k_key)) {
    hp.head_dim = positive(k_key);
    hp.head_dim_v = f.has(v_key) ? positive(v_key) : hp.head_dim;
  } else {
    if (hp.n_embd % hp.n_head != 0) fail(f, "embedding_length is not a multiple of head_count");
    hp.head_dim = hp.head_dim_v = hp.n_embd / hp.n_head;
  }
  for (int64_t kv :
       hp.n_head_kv_of.empty() ? std::vector<int64_t>{hp.n_head_kv} : hp.n_head_kv_of) {
    if (hp.n_head % kv != 0) {
      fail(f, "head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
                  std::to_string(kv));
    }
  }
  hp.n_rot = f.has(a + "rope.dimension_count") ? positive(a + "rope.dimension_count") : hp.head_dim;
  if (mla) {
    // One latent (and one rope key) per token, shared by every query head: one KV head.
    hp.n_head_kv = 1;
    hp.kv_lora_rank = positive(a + "attention.kv_lora_rank");
    hp.q_lora_rank = f.has(a + "attention.q_lora_rank") ? positive(a + "attention.q_lora_rank") : 0;
    if (hp.n_rot >= hp.head_dim || hp.n_rot % 2 != 0) {
      fail(f, "rope.dimension_count " + std::to_string(hp.n_rot) +
                  " must be even and smaller than the key size " + std::to_string(hp.head_dim));
    }
    auto any_layer_has = [&](const char* name) {
      for (int64_t il = 0; il < hp.n_layer; ++il) {
        if (f.find_tensor("blk." + std::to_string(il) + "." + name) != nullptr) return true;
        if (!partial) return false;
      }
      return false;
    };
    hp.mla_kv_b = any_layer_has("attn_kv_b.weight");
    hp.mla_split_b = any_layer_has("attn_k_b.weight");
    hp.mla_3d_b = hp.mla_split_b && mla_keys;
    if (!hp.mla_kv_b && !hp.mla_split_b && !partial) {
      fail(f,
           "multi-head latent attention needs 'blk.0.attn_kv_b.weight' or "
           "'blk.0.attn_k_b.weight' and 'blk.0.attn_v_b.weight'");
    }
  } else if (arch.attention == AttentionKind::kCompressed) {
    read_compressed_attention(f, a, partial, hp);
  } else if (hp.head_dim_v != hp.head_dim) {
    fail(f, "different key and value head sizes are not supported for grouped-query attention");
  } else if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
    // Partial rotary embeddings (GLM-4.5, MiniMax-M2) turn the first n_rot dimensions.
    fail(f, "rope.dimension_count " + std::to_string(hp.n_rot) +
                " must be even and at most the head size " + std::to_string(hp.head_dim));
  }
  if (arch.qk_norm_optional) {
    // GLM-4.5-Air has no q/k norm: the first block the file holds says.
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const std::string blk = "blk." + std::to_string(il) + ".";
      if (f.find_tensor(blk + "attn_q.weight") == nullptr && partial) continue;
      hp.qk_norm_absent = f.find_tensor(blk + "attn_q_norm.weight") == nullptr;
      break;
    }
  }
  if (arch.dsa_indexer) {
    hp.n_indexer_head = positive(a + "attention.indexer.head_count");
    hp.indexer_head_dim = positive(a + "attention.indexer.key_length");
    hp.indexer_top_k = positive(a + "attention.indexer.top_k");
    if (hp.q_lora_rank == 0) fail(f, "the DSA indexer needs attention.q_lora_rank");
  }
  if (hp.head_dim % 2 != 0) fail(f, "the key size " + std::to_string(hp.head_dim) + " is odd");

  // Rope scaling: linear or YaRN, from rope.scaling.* (a factor alone means linear).
  const std::string scaling = f.has(a + "rope.scaling.type")
                                  ? std::string(f.get_string(a + "rope.scaling.type"))
                                  : std::string("linear");
  hp.rope_factor = f.get_f32_opt(a + "rope.scaling.factor").value_or(1.0f);
  if (!(hp.rope_factor > 0) || hp.rope_factor > 1e6f) {
    fail(f, "rope.scaling.factor " + std::to_string(hp.rope_factor) + " is out of range");
  }
  if (scaling == "yarn") {
    hp.rope_scaling = RopeScaling::kYarn;
    hp.rope_original_ctx = f.has(a + "rope.scaling.original_context_length")
                               ? positive(a + "rope.scaling.original_context_length")
                               : hp.n_ctx;
    hp.yarn_log_multiplier = f.get_f32_opt(a + "rope.scaling.yarn_log_multiplier").value_or(0.0f);
    hp.yarn_beta_fast = f.get_f32_opt(a + "rope.scaling.yarn_beta_fast").value_or(32.0f);
    hp.yarn_beta_slow = f.get_f32_opt(a + "rope.scaling.yarn_beta_slow").value_or(1.0f);
  } else if (scaling == "linear") {
    hp.rope_scaling = hp.rope_factor != 1.0f ? RopeScaling::kLinear : RopeScaling::kNone;
  } else if (scaling == "none") {
    hp.rope_scaling = RopeScaling::kNone;
  } else {
    fail(f, "rope.scaling.type '" + scaling + "' is not supported (none, linear, yarn)");
  }
  if (f.has(a + "attention.sliding_window")) {
    hp.sliding_window = positive(a + "attention.sliding_window");
  }
  if (arch.layer_shapes) read_layer_shapes(f, a, hp);

  if (arch.moe || (arch.moe_beside_dense && f.has(a + "expert_count"))) {
    hp.n_expert = positive(a + "expert_count");
    hp.n_expert_used = positive(a + "expert_used_count");
    if (hp.n_expert_used > hp.n_expert) fail(f, "expert_used_count exceeds expert_count");
    hp.n_leading_dense =
        static_cast<int64_t>(f.get_u64_opt(a + "leading_dense_block_count").value_or(0));
    if (hp.n_leading_dense > hp.n_layer) fail(f, "leading_dense_block_count exceeds block_count");
    // The first MoE layer the file holds (a partial file may start anywhere).
    const gguf::TensorInfo* gate = nullptr;
    for (int64_t il = 0; il < hp.n_layer && gate == nullptr; ++il) {
      gate = f.find_tensor("blk." + std::to_string(il) + ".ffn_gate_exps.weight");
      if (!partial && il >= hp.n_leading_dense) break;
    }
    hp.n_ff_expert = f.has(a + "expert_feed_forward_length")
                         ? positive(a + "expert_feed_forward_length")
                     : gate != nullptr && gate->shape.size() == 3 ? gate->shape[1]
                                                                  : 0;
    if (hp.n_ff_expert == 0) fail(f, "missing '" + a + "expert_feed_forward_length'");
    if (hp.n_leading_dense > 0 || arch.moe_beside_dense) {
      hp.n_ff = number_or_layers(a + "feed_forward_length", hp.n_ff_of);
    }
    hp.n_expert_shared = static_cast<int64_t>(f.get_u64_opt(a + "expert_shared_count").value_or(0));
    if (hp.n_expert_shared > 64) fail(f, "expert_shared_count is out of range");
    // Qwen3-Next / Qwen3.5 state one shared expert by its width.
    if (f.has(a + "expert_shared_feed_forward_length")) {
      hp.n_ff_shared = positive(a + "expert_shared_feed_forward_length");
      hp.n_expert_shared = std::max<int64_t>(hp.n_expert_shared, 1);
    }
    hp.gating = arch.default_gating;
    if (f.has(a + "expert_gating_func")) {
      const uint64_t func = f.get_u64(a + "expert_gating_func");
      if (func == 1) {
        hp.gating = Gating::kSoftmax;
      } else if (func == 2) {
        hp.gating = Gating::kSigmoid;
      } else if (func == 4) {
        hp.gating = Gating::kSqrtSoftplus;
      } else {
        fail(f, "expert_gating_func " + std::to_string(func) +
                    " is not supported (1 softmax, 2 sigmoid, 4 sqrt-softplus)");
      }
    }
    hp.expert_weights_norm = f.has(a + "expert_weights_norm")
                                 ? f.get_bool(a + "expert_weights_norm")
                                 : arch.default_expert_weights_norm;
    if (arch.expert_weights_scale_required && !f.has(a + "expert_weights_scale")) {
      fail(f, "missing '" + a + "expert_weights_scale' (" + arch_name + " needs it)");
    }
    hp.expert_weights_scale = f.get_f32_opt(a + "expert_weights_scale").value_or(1.0f);
    hp.n_expert_group = static_cast<int64_t>(f.get_u64_opt(a + "expert_group_count").value_or(1));
    hp.n_expert_group_used =
        static_cast<int64_t>(f.get_u64_opt(a + "expert_group_used_count").value_or(1));
    if (hp.n_expert_group < 1 || hp.n_expert % hp.n_expert_group != 0 ||
        hp.n_expert_group_used < 1 || hp.n_expert_group_used > hp.n_expert_group ||
        hp.n_expert_used > hp.n_expert_group_used * (hp.n_expert / hp.n_expert_group)) {
      fail(f, "expert groups (" + std::to_string(hp.n_expert_group) + " groups, " +
                  std::to_string(hp.n_expert_group_used) + " used) do not fit " +
                  std::to_string(hp.n_expert) + " experts with " +
                  std::to_string(hp.n_expert_used) + " used");
    }
    // Clamped SwiGLU (DeepSeek V4; its routed experts' limit is required).
    if (f.has(a + "swiglu_clamp_exp") || arch.hyper_connections) {
      hp.swiglu_limit = f.get_f32(a + "swiglu_clamp_exp");
      hp.swiglu_limit_shared = f.get_f32_opt(a + "swiglu_clamp_shexp").value_or(hp.swiglu_limit);
    }
    hp.n_hash_layers = static_cast<int64_t>(f.get_u64_opt(a + "hash_layer_count").value_or(0));
    if (hp.n_hash_layers > hp.n_layer) fail(f, "hash_layer_count exceeds block_count");
    for (int64_t il = std::max(hp.n_leading_dense, hp.n_hash_layers); il < hp.n_layer; ++il) {
      if (f.find_tensor("blk." + std::to_string(il) + ".exp_probs_b.bias") != nullptr) {
        hp.expert_selection_bias = true;
        break;
      }
      if (!partial) break;
    }
  } else {
    hp.n_ff = number_or_layers(a + "feed_forward_length", hp.n_ff_of);
  }
  if (arch.delta_net) {
    hp.delta_conv_kernel = positive(a + "ssm.conv_kernel");
    hp.delta_head_k = positive(a + "ssm.state_size");
    hp.delta_n_k_heads = positive(a + "ssm.group_count");
    hp.delta_n_v_heads = positive(a + "ssm.time_step_rank");
    const int64_t inner = positive(a + "ssm.inner_size");
    if (inner % hp.delta_n_v_heads != 0 || hp.delta_n_v_heads % hp.delta_n_k_heads != 0) {
      fail(f, "ssm.inner_size " + std::to_string(inner) + ", ssm.time_step_rank " +
                  std::to_string(hp.delta_n_v_heads) + " and ssm.group_count " +
                  std::to_string(hp.delta_n_k_heads) +
                  " do not divide into value heads that share key heads evenly");
    }
    hp.delta_head_v = inner / hp.delta_n_v_heads;
    hp.full_attention_interval =
        static_cast<int64_t>(f.get_u64_opt(a + "full_attention_interval").value_or(4));
    if (hp.full_attention_interval < 1 || hp.full_attention_interval > hp.n_layer + hp.n_nextn) {
      fail(f, "full_attention_interval " + std::to_string(hp.full_attention_interval) +
                  " is out of range");
    }
  }
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  const gguf::TensorInfo* head = f.find_tensor("output.weight");
  const std::optional<FileSlice> held = read_slice_metadata(f);
  // A cut output head shows only some of the vocabulary; token_embd is never cut.
  const gguf::TensorInfo* vocab_rows = embd != nullptr ? embd : partial && !held ? head : nullptr;
  if (vocab_rows == nullptr && !partial) fail(f, "missing tensor 'token_embd.weight'");
  if (vocab_rows != nullptr) {
    if (vocab_rows->shape.size() != 2) fail(f, std::string(vocab_rows->name) + " must be 2-D");
    hp.n_vocab = vocab_rows->shape[1];
  }
  if (held) {
    if (vocab_rows != nullptr && hp.n_vocab != held->n_vocab) {
      fail(f, "herd.slice.n_vocab " + std::to_string(held->n_vocab) + " disagrees with " +
                  std::string(vocab_rows->name));
    }
    hp.n_vocab = held->n_vocab;
    info.file_slice = held->slice;
  }
  hp.tied_output = head == nullptr;
  if (arch.layer_shapes) check_layer_shapes(f, arch, hp);
  // Soft-capping, for the rows that have it (another row's file may carry the key unused).
  hp.final_softcap = arch.default_final_softcap;
  if (hp.final_softcap > 0) {
    hp.final_softcap = f.get_f32_opt(a + "final_logit_softcapping").value_or(hp.final_softcap);
    if (!(hp.final_softcap >= 0) || hp.final_softcap > 1e6f) {
      fail(f, "final_logit_softcapping " + std::to_string(hp.final_softcap) + " is out of range");
    }
  }

  for (TensorSpec spec : model_tensors(arch, hp)) {
    const gguf::TensorInfo* t = f.find_tensor(spec.name);
    if (t == nullptr) {  // the other spelling converters use (the list then names it so)
      const std::string alias = tensor_alias(spec.name);
      if (!alias.empty() && (t = f.find_tensor(alias)) != nullptr) spec.name = alias;
    }
    if (t == nullptr && partial) continue;
    if (t == nullptr) fail(f, "missing tensor '" + spec.name + "'");
    const std::vector<int64_t> expected =
        held ? cut_shape(spec.name, t->type, spec.shape, weight_cut(spec, held->slice, hp))
             : spec.shape;
    if (t->shape != expected) {
      fail(f, "tensor '" + spec.name + "' has shape " + shape_text(t->shape) + ", expected " +
                  shape_text(expected) + (held ? " (the file's slice of it)" : ""));
    }
    info.weight_bytes += t->n_bytes;
    info.tensors.push_back(spec);
  }
  if (const gguf::TensorInfo* freqs = f.find_tensor("rope_freqs.weight")) {
    if (freqs->shape != std::vector<int64_t>{hp.n_rot / 2} || freqs->type != TensorType::F32) {
      fail(f, "rope_freqs.weight must be f32 of shape [" + std::to_string(hp.n_rot / 2) + "]");
    }
    info.has_rope_freqs = true;
  }
  return info;
}

ModelInfo mtp_model_info(const ModelInfo& info) {
  if (info.hp.n_nextn == 0) throw Error("model", "the model has no NextN (MTP) block");
  ModelInfo mtp = info;
  mtp.hp.n_layer += info.hp.n_nextn;
  mtp.hp.n_nextn_run = info.hp.n_nextn;
  mtp.hp.n_nextn = 0;
  // The same tensors (the file's names), the NextN blocks' now bound to their layers; what
  // the file lacks and read_model_info left out stays out.
  mtp.tensors.clear();
  for (TensorSpec& t : model_tensors(*info.arch, mtp.hp)) {
    if (find_tensor_spec(info, t.name) == nullptr) t.name = tensor_alias(t.name);
    if (!t.name.empty() && find_tensor_spec(info, t.name) != nullptr) {
      mtp.tensors.push_back(std::move(t));
    }
  }
  return mtp;
}

const TensorSpec* find_tensor_spec(const ModelInfo& info, std::string_view name) {
  for (const TensorSpec& spec : info.tensors) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace herd
