#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/builtin_vocab.h"
#include "model/file_type.h"
#include "util/cpu_info.h"
#include "util/error.h"

namespace herd {
namespace {

// A small, fast, portable generator (splitmix64 seeding xoshiro256**): the same seed gives
// the same model on every platform, unlike std::normal_distribution.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : state_) s = splitmix(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall), centred
  // and scaled to unit variance. One generator call and no transcendental functions per
  // value, which makes writing a billion weights take seconds rather than a minute; the
  // tails stop at +-3.46 sigma, which random test weights do not miss.
  float normal() {
    uint64_t r = next();
    uint32_t sum = static_cast<uint32_t>(r & 0xFFFF) + static_cast<uint32_t>((r >> 16) & 0xFFFF) +
                   static_cast<uint32_t>((r >> 32) & 0xFFFF) + static_cast<uint32_t>(r >> 48);
    constexpr float kMean = 2.0f * 65535.0f;
    constexpr float kScale = 1.7320508f / 65535.0f;  // sqrt(3) / 65535: unit variance
    return (static_cast<float>(sum) - kMean) * kScale;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_[4];
};

// How a weight's values are drawn: value = mean + scale * N(0, 1).
struct Init {
  float mean;
  float scale;
};

Init init_for(const TensorSpec& t, const HParams& hp) {
  // A 3-D attn_k_b [nope, kv_lora, n_head] stores each head's (nope x kv_lora) matrix
  // transposed: its inputs are the latent's kv_lora values.
  const bool k_b_3d = t.shape.size() == 3 && t.name.ends_with(".attn_k_b.weight");
  const float fan_in = static_cast<float>(k_b_3d ? t.shape[1] : t.shape[0]);
  switch (t.role) {
    case TensorRole::kEmbedding:
      // A tied embedding is also the output matrix: logits of the same spread as an
      // untied output's (2 / sqrt(fan_in) against a normed hidden state).
      return {0.0f, hp.tied_output ? 2.0f / std::sqrt(fan_in) : 0.5f};
    case TensorRole::kNorm:
      // The shared expert's gate is a router of one output.
      if (t.name.ends_with("ffn_gate_inp_shexp.weight")) return {0.0f, 2.0f / std::sqrt(fan_in)};
      return {1.0f, 0.1f};
    case TensorRole::kBias:
      // Gated DeltaNet: ssm_a = -exp(A_log) must stay negative (a decay below 1); the
      // convolution's taps are a small linear layer over the window.
      if (t.name.ends_with(".ssm_a")) return {-2.0f, 0.5f};
      if (t.name.ends_with("ssm_conv1d.weight")) return {0.0f, 1.0f / std::sqrt(fan_in)};
      // A sink is a logit beside the attention scores, of their order, not a small offset.
      if (t.name.ends_with("attn_sinks.weight")) return {0.0f, 1.0f};
      return {0.0f, 0.1f};
    case TensorRole::kRouter:
    case TensorRole::kOutput:
      return {0.0f, 2.0f / std::sqrt(fan_in)};
    default:
      // Unit variance in, unit variance out: activations keep their scale through the layers.
      return {0.0f, 1.0f / std::sqrt(fan_in)};
  }
}

// A block's last projection, whose output is added to the residual stream.
bool is_block_output(const std::string& name) {
  return name.starts_with("blk.") && (name.find(".attn_output.") != std::string::npos ||
                                      name.find(".ffn_down") != std::string::npos ||
                                      name.find(".ssm_out.") != std::string::npos);
}

// Fills row `row` of tensor `index` with values drawn from its own stream, so that rows can
// be generated in any order and on any thread with the same result.
void draw_row(uint64_t seed, size_t index, int64_t row, Init init, std::vector<float>& out) {
  Rng rng(seed ^ (0x100000001b3ULL * (index + 1)) ^ (static_cast<uint64_t>(row) << 32));
  for (float& x : out) x = init.mean + init.scale * rng.normal();
}

// ffn_gate_tid2eid [n_used, n_vocab] int32: for each token id n_used distinct experts, drawn
// like the reference's test models (the first of a permutation).
void write_hash_experts(uint64_t seed, size_t index, const TensorSpec& t, const HParams& hp,
                        std::span<uint8_t> out) {
  const int64_t n_used = t.shape[0], n_vocab = t.shape[1];
  std::vector<int32_t> ids(static_cast<size_t>(n_used * n_vocab));
  std::vector<int32_t> perm(static_cast<size_t>(hp.n_expert));
  for (int64_t v = 0; v < n_vocab; ++v) {
    Rng rng(seed ^ (0x100000001b3ULL * (index + 1)) ^ (static_cast<uint64_t>(v) << 32));
    for (int64_t e = 0; e < hp.n_expert; ++e)
      perm[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    for (int64_t j = 0; j < n_used; ++j) {  // a partial Fisher-Yates shuffle
      const auto k = j + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(hp.n_expert - j));
      std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(k)]);
      ids[static_cast<size_t>(v * n_used + j)] = perm[static_cast<size_t>(j)];
    }
  }
  HERD_CHECK(out.size() == ids.size() * sizeof(int32_t));
  std::memcpy(out.data(), ids.data(), out.size());
}

// Writes the tokenizer.* metadata: copied from a vocabulary file, or the built-in one.
int64_t write_vocab(gguf::Writer& w, const std::string& vocab_path) {
  if (vocab_path.empty()) {
    BuiltinVocab v = make_builtin_vocab();
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
    w.set_string_array("tokenizer.ggml.merges", v.merges);
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
    w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_string("tokenizer.chat_template", v.chat_template);
    return static_cast<int64_t>(v.tokens.size());
  }
  gguf::File vocab = gguf::File::open(vocab_path);
  if (!vocab.has("tokenizer.ggml.tokens")) {
    throw Error("synth", "'" + vocab_path + "' has no tokenizer.ggml.tokens: not a vocabulary");
  }
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) w.set_value(key, value);
  }
  return static_cast<int64_t>(vocab.get_string_array("tokenizer.ggml.tokens").size());
}

// Every key read_model_info reads, laid out as the reference's converters write them (see
// ../shared/models/frontier/README.md).
void write_hparams(gguf::Writer& w, const ArchSpec& arch, const HParams& hp, const FileType& ft) {
  const std::string a(arch.name);
  const bool mla = arch.attention == AttentionKind::kMla;
  auto u32 = [&](const std::string& key, int64_t v) {
    w.set_u32(a + "." + key, static_cast<uint32_t>(v));
  };
  w.set_string("general.architecture", a);
  w.set_string("general.name", "herd synthetic " + a);
  w.set_u32("general.file_type", ft.gguf_id);
  w.set_u32("general.quantization_version", 2);
  u32("vocab_size", hp.n_vocab);
  u32("context_length", hp.n_ctx);
  u32("embedding_length", hp.n_embd);
  u32("block_count", hp.n_layer + hp.n_nextn);
  if (hp.n_nextn > 0) u32("nextn_predict_layers", hp.n_nextn);
  auto per_layer = [&](const std::string& key, const std::vector<int64_t>& values) {
    const std::vector<int32_t> v(values.begin(), values.end());
    w.set_i32_array(a + "." + key, v);
  };
  // An MoE model without dense layers states its experts' width here, as gpt-oss's converter.
  if (!hp.n_ff_of.empty()) {
    per_layer("feed_forward_length", hp.n_ff_of);
  } else {
    u32("feed_forward_length", hp.n_ff > 0 ? hp.n_ff : hp.n_ff_expert);
  }
  u32("attention.head_count", hp.n_head);
  if (!hp.n_head_kv_of.empty()) {
    per_layer("attention.head_count_kv", hp.n_head_kv_of);
  } else {
    // MLA: every head has its own decompressed keys and values (the reference's layout), or
    // one KV head, the latent (mainline's).
    u32("attention.head_count_kv", mla && !hp.mla_3d_b ? hp.n_head : hp.n_head_kv);
  }
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", hp.rms_eps);
  w.set_f32(a + ".rope.freq_base", hp.rope_base);
  u32("rope.dimension_count", hp.n_rot);
  if (mla && hp.mla_3d_b) {
    // Mainline's layout: the cached row (latent + rope key) and the latent as the KV head's
    // sizes, the per-head sizes under *_mla.
    u32("attention.key_length", hp.kv_lora_rank + hp.n_rot);
    u32("attention.value_length", hp.kv_lora_rank);
    u32("attention.key_length_mla", hp.head_dim);
    u32("attention.value_length_mla", hp.head_dim_v);
  } else if (arch.explicit_head_dim) {
    u32("attention.key_length", hp.head_dim);
    u32("attention.value_length", hp.head_dim_v);
  }
  if (arch.dsa_indexer) {
    u32("attention.indexer.head_count", hp.n_indexer_head);
    u32("attention.indexer.key_length", hp.indexer_head_dim);
    u32("attention.indexer.top_k", hp.indexer_top_k);
  }
  if (mla) {
    // No q_lora_rank key means plain attn_q (V2-Lite); the key cannot hold 0.
    if (hp.q_lora_rank > 0) u32("attention.q_lora_rank", hp.q_lora_rank);
    u32("attention.kv_lora_rank", hp.kv_lora_rank);
  }
  if (hp.sliding_window > 0) u32("attention.sliding_window", hp.sliding_window);
  if (arch.attention == AttentionKind::kCompressed) {
    // DeepSeek V4's keys, as ../shared/models/frontier2/README.md lists them.
    u32("attention.q_lora_rank", hp.q_lora_rank);
    u32("attention.output_group_count", hp.n_out_group);
    u32("attention.output_lora_rank", hp.o_lora_rank);
    std::vector<int32_t> ratios(hp.compress_ratios.begin(), hp.compress_ratios.end());
    w.set_i32_array(a + ".attention.compress_ratios", ratios);
    w.set_f32(a + ".attention.compress_rope_freq_base", hp.compress_rope_base);
    u32("attention.indexer.head_count", hp.n_indexer_head);
    u32("attention.indexer.key_length", hp.indexer_head_dim);
    u32("attention.indexer.top_k", hp.indexer_top_k);
    u32("hash_layer_count", hp.n_hash_layers);
    w.set_f32(a + ".swiglu_clamp_exp", hp.swiglu_limit);
    w.set_f32(a + ".swiglu_clamp_shexp", hp.swiglu_limit_shared);
    u32("hyper_connection.count", hp.n_hc);
    u32("hyper_connection.sinkhorn_iterations", hp.hc_sinkhorn_iters);
    w.set_f32(a + ".hyper_connection.epsilon", hp.hc_eps);
  }
  if (arch.layer_shapes) {
    // Gemma 4's converter: the sliding layers' sizes and rope, the pattern as bools.
    u32("attention.key_length_swa", hp.head_dim_swa);
    u32("attention.value_length_swa", hp.head_dim_swa);
    u32("rope.dimension_count_swa", hp.n_rot_swa);
    w.set_f32(a + ".rope.freq_base_swa", hp.rope_base_swa);
    w.set_bool_array(a + ".attention.sliding_window_pattern", hp.swa_layers);
    u32("attention.shared_kv_layers", hp.n_kv_shared);
    u32("embedding_length_per_layer_input", hp.n_embd_per_layer);
  }
  if (hp.final_softcap > 0) w.set_f32(a + ".final_logit_softcapping", hp.final_softcap);
  if (hp.rope_scaling == RopeScaling::kLinear) {
    w.set_string(a + ".rope.scaling.type", "linear");
    w.set_f32(a + ".rope.scaling.factor", hp.rope_factor);
  } else if (hp.rope_scaling == RopeScaling::kYarn) {
    w.set_string(a + ".rope.scaling.type", "yarn");
    w.set_f32(a + ".rope.scaling.factor", hp.rope_factor);
    u32("rope.scaling.original_context_length", hp.rope_original_ctx);
    if (hp.yarn_log_multiplier > 0) {
      w.set_f32(a + ".rope.scaling.yarn_log_multiplier", hp.yarn_log_multiplier);
    }
  }
  if (arch.delta_net) {
    u32("ssm.conv_kernel", hp.delta_conv_kernel);
    u32("ssm.state_size", hp.delta_head_k);
    u32("ssm.group_count", hp.delta_n_k_heads);
    u32("ssm.time_step_rank", hp.delta_n_v_heads);
    u32("ssm.inner_size", hp.delta_n_v_heads * hp.delta_head_v);
    u32("full_attention_interval", hp.full_attention_interval);
    if (arch.synth.rope_sections) {
      // M-RoPE sections over the rotated pairs, as Qwen3.5's converter writes them ([11, 11,
      // 10, 0] of 32 pairs; the reference requires the key even for text, where all
      // sections get the same position).
      const int64_t pairs = hp.n_rot / 2, first = (pairs + 2) / 3;
      const int32_t sections[] = {static_cast<int32_t>(first), static_cast<int32_t>(first),
                                  static_cast<int32_t>(pairs - 2 * first), 0};
      w.set_i32_array(a + ".rope.dimension_sections", sections);
    }
  }
  if (hp.n_ff_shared > 0) u32("expert_shared_feed_forward_length", hp.n_ff_shared);
  if (hp.n_expert > 0) {
    u32("expert_count", hp.n_expert);
    u32("expert_used_count", hp.n_expert_used);
    u32("expert_feed_forward_length", hp.n_ff_expert);
    // The DeepSeek keys: the reference requires them for deepseek2 and ignores them elsewhere;
    // written for every MoE architecture so that no reader falls back on a default.
    u32("leading_dense_block_count", hp.n_leading_dense);
    u32("expert_shared_count", hp.n_expert_shared);
    u32("expert_gating_func", hp.gating == Gating::kSqrtSoftplus ? 4
                              : hp.gating == Gating::kSigmoid    ? 2
                                                                 : 1);
    w.set_bool(a + ".expert_weights_norm", hp.expert_weights_norm);
    w.set_f32(a + ".expert_weights_scale", hp.expert_weights_scale);
    u32("expert_group_count", hp.n_expert_group);
    u32("expert_group_used_count", hp.n_expert_group_used);
  }
}

[[noreturn]] void bad_option(const std::string& message) {
  throw Error("synth", message);
}

// Gemma 4's per-layer shapes (ArchSpec::layer_shapes) in the real models' proportions:
// every sliding_period-th layer and the last are global, with heads global_head_dim_mul
// times as wide (the --head-dim of the sliding ones) and a global_kv_div-th of the KV heads;
// with per-layer inputs (E2B / E4B) about half the layers share the keys and values of the
// last two with their own (one sliding, one global, as the reference reads them) and have a
// doubled MLP, and every layer has attn_v (26B-A4B and 31B: V = K on the global layers).
void layer_shapes(const SynthOptions& o, const ArchSpec& arch, HParams& hp) {
  const SynthDefaults& d = arch.synth;
  const int64_t n_blocks = hp.n_layer + hp.n_nextn;
  const int64_t period = o.sliding_period > 0 ? o.sliding_period : d.sliding_period;
  for (int64_t il = 0; il < n_blocks; ++il) {
    const bool global = (il + 1) % period == 0 || il == hp.n_layer - 1;
    hp.swa_layers.push_back(global ? 0 : 1);
  }
  hp.head_dim_swa = hp.n_rot_swa = hp.head_dim;
  hp.head_dim = hp.head_dim_v = hp.n_rot = hp.head_dim * d.global_head_dim_mul;
  hp.rope_base_swa = arch.swa_rope_base;
  const int64_t kv_global = std::max<int64_t>(1, hp.n_head_kv / d.global_kv_div);
  if (hp.n_head % kv_global != 0) {
    bad_option("--heads " + std::to_string(hp.n_head) + " is not a multiple of the global " +
               "layers' " + std::to_string(kv_global) + " KV heads");
  }
  if (kv_global != hp.n_head_kv) {
    for (uint8_t swa : hp.swa_layers) hp.n_head_kv_of.push_back(swa ? hp.n_head_kv : kv_global);
  }
  hp.n_embd_per_layer = std::max<int64_t>(0, o.n_embd_per_layer);
  hp.global_v_is_k = hp.n_embd_per_layer == 0;
  // The layers before the shared ones must end [sliding, global].
  auto shareable = [&](int64_t k) {
    const int64_t first = hp.n_layer - k;
    return k == 0 || (first >= 2 && hp.swa_layers[static_cast<size_t>(first - 1)] == 0 &&
                      hp.swa_layers[static_cast<size_t>(first - 2)] != 0);
  };
  if (o.n_kv_shared >= 0) {
    hp.n_kv_shared = o.n_kv_shared;
    if (hp.n_kv_shared >= hp.n_layer || !shareable(hp.n_kv_shared)) {
      bad_option("--shared-kv-layers " + std::to_string(hp.n_kv_shared) +
                 ": the layers before the shared ones must end with a sliding and a global one");
    }
  } else if (hp.n_embd_per_layer > 0) {
    for (int64_t k = hp.n_layer / 2; k > 0 && hp.n_kv_shared == 0; --k) {
      if (shareable(k)) hp.n_kv_shared = k;
    }
  }
  if (hp.n_kv_shared > 0) {
    for (int64_t il = 0; il < n_blocks; ++il) {
      hp.n_ff_of.push_back(hp.n_ff * (il >= hp.n_layer - hp.n_kv_shared ? 2 : 1));
    }
    hp.n_ff *= 2;  // the widest, as read_model_info has it
  }
  hp.final_softcap = arch.default_final_softcap;
}

}  // namespace

HParams synth_hparams(const SynthOptions& o, int64_t n_vocab) {
  const ArchSpec* arch = find_arch(o.arch);
  if (arch == nullptr) bad_option("unknown architecture '" + o.arch + "'");
  const bool mla = arch->attention == AttentionKind::kMla;
  const bool compressed = arch->attention == AttentionKind::kCompressed;
  const SynthDefaults& d = arch->synth;
  HParams hp;
  hp.n_vocab = n_vocab;
  hp.n_embd = o.n_embd;
  hp.n_layer = o.n_layer;
  hp.n_head = o.n_head;
  hp.n_head_kv = o.n_head_kv > 0 ? o.n_head_kv : std::max<int64_t>(1, o.n_head / 2);
  hp.n_ctx = o.n_ctx;
  hp.rms_eps = arch->default_rms_eps;
  hp.rope_base = arch->default_rope_base;
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_ctx <= 0) {
    bad_option("--embd, --layers, --heads and the context length must be positive");
  }
  if (!(o.block_scale >= 0.0f && o.block_scale <= 100.0f)) {
    bad_option("--block-scale " + std::to_string(o.block_scale) + " is not in [0, 100]");
  }
  if (o.head_dim > 0) {
    if (!arch->explicit_head_dim && o.head_dim * hp.n_head != hp.n_embd) {
      bad_option("--head-dim " + std::to_string(o.head_dim) + " x --heads " +
                 std::to_string(hp.n_head) + " must equal --embd for " + o.arch);
    }
    hp.head_dim = o.head_dim;
  } else if (d.head_dim > 0) {
    hp.head_dim = d.head_dim;  // the real models' head size, whatever the width
  } else if (mla && hp.n_embd / hp.n_head >= 128) {
    hp.head_dim = 192;  // V2/V3: 128 nope + 64 rope, whatever the embedding width
  } else {
    if (hp.n_embd % hp.n_head != 0) {
      bad_option("--embd " + std::to_string(hp.n_embd) + " is not a multiple of --heads " +
                 std::to_string(hp.n_head));
    }
    hp.head_dim = hp.n_embd / hp.n_head;
  }
  if (hp.head_dim % 2 != 0) bad_option("the head size must be even for rope");
  hp.head_dim_v = hp.n_rot = hp.head_dim;
  if (mla) {
    // The latent is one KV head every query head reads (as read_model_info has it); the
    // file says head_count_kv = head_count, as the reference's converter writes it.
    if (o.n_head_kv > 0 && o.n_head_kv != hp.n_head) {
      bad_option("--kv-heads does not apply to " + o.arch + " (every head reads the latent)");
    }
    hp.n_head_kv = 1;
    // Default split of a key: V2/V3's 128 nope + 64 rope for wide keys; for narrower ones
    // about a third rope, with the nope part a multiple of 32 when the key allows, so that
    // attn_k_b's rows (nope long) fit the quant blocks (48 = 32 + 16, 64 = 32 + 32, 96 = 64
    // + 32).
    const int64_t nope32 = hp.head_dim * 2 / 3 / 32 * 32;
    hp.n_rot = o.rope_dim >= 0                              ? o.rope_dim
               : d.rope_dim > 0 && d.rope_dim < hp.head_dim ? d.rope_dim
               : hp.head_dim >= 192                         ? 64
               : nope32 > 0                                 ? hp.head_dim - nope32
                            : std::max<int64_t>(2, hp.head_dim / 3 / 2 * 2);
    if (hp.n_rot <= 0 || hp.n_rot % 2 != 0 || hp.n_rot >= hp.head_dim) {
      bad_option("--rope-dim " + std::to_string(hp.n_rot) +
                 " must be even, positive and smaller than the key size " +
                 std::to_string(hp.head_dim) + " (--head-dim)");
    }
    const int64_t nope = hp.head_dim - hp.n_rot;
    hp.head_dim_v = o.head_dim_v > 0 ? o.head_dim_v : d.head_dim_v > 0 ? d.head_dim_v : nope;
    hp.kv_lora_rank = o.kv_lora_rank > 0   ? o.kv_lora_rank
                      : d.kv_lora_rank > 0 ? d.kv_lora_rank
                      : hp.n_embd >= 1024  ? 512
                                           : std::max<int64_t>(2, hp.n_embd / 2);
    // Large models factor the queries through a rank of about 3/8 of the width (V3: 1536 of
    // 7168); small ones through embd / 2 (as the frontier test model). 0 means plain attn_q.
    hp.q_lora_rank = o.q_lora_rank >= 0  ? o.q_lora_rank
                     : hp.n_embd >= 1024 ? (hp.n_embd * 3 / 8 + 63) / 64 * 64
                                         : std::max<int64_t>(2, hp.n_embd / 2);
    if (o.kv_lora_rank == 0) bad_option("--kv-lora must be positive");
    // Both forms of the keys' and values' decompression, as the reference's converter
    // writes them: attn_kv_b and the attn_k_b / attn_v_b cut out of it; or mainline's 3-D
    // attn_k_b / attn_v_b alone.
    hp.mla_kv_b = !d.mla_mainline;
    hp.mla_split_b = true;
    hp.mla_3d_b = d.mla_mainline;
    if (arch->dsa_indexer) {
      if (hp.q_lora_rank == 0) bad_option("--q-lora 0: the DSA indexer of " + o.arch + " needs it");
      hp.n_indexer_head = d.n_indexer_head;
      hp.indexer_head_dim = d.indexer_head_dim;
      hp.indexer_top_k = d.indexer_top_k;
    }
  } else if (compressed) {
    // One latent head (K = V); rope on the last quarter of it (V4: 64 of 512).
    if (o.n_head_kv > 0 && o.n_head_kv != 1) bad_option("--kv-heads: " + o.arch + " has one");
    if (o.head_dim_v > 0 && o.head_dim_v != hp.head_dim) {
      bad_option("--head-dim-v: " + o.arch + "'s values are its keys");
    }
    hp.n_head_kv = 1;
    hp.n_rot = o.rope_dim >= 0 ? o.rope_dim : std::max<int64_t>(2, hp.head_dim / 4 / 2 * 2);
    if (hp.n_rot <= 0 || hp.n_rot % 2 != 0 || hp.n_rot >= hp.head_dim) {
      bad_option("--rope-dim " + std::to_string(hp.n_rot) +
                 " must be even, positive and smaller than the key size " +
                 std::to_string(hp.head_dim));
    }
    hp.kv_lora_rank = hp.head_dim;
    hp.q_lora_rank = o.q_lora_rank > 0 ? o.q_lora_rank : std::max<int64_t>(2, hp.n_embd / 2);
    if (o.kv_lora_rank >= 0) bad_option("--kv-lora: " + o.arch + "'s latent is the key size");
    hp.n_out_group = hp.n_head % 2 == 0 ? 2 : 1;
    hp.o_lora_rank = std::max<int64_t>(1, hp.n_embd / 2);
    // Layer 0 the window only, then CSA and HCA layers alternating (V4's pattern).
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      hp.compress_ratios.push_back(il == 0 ? 0 : il % 2 == 1 ? arch->sparse_compress_ratio : 128);
    }
    hp.compress_rope_base = 160000.0f;
    hp.indexer_head_dim = 16;  // a power of two, at least the rope dims, at most half a key
    while (hp.indexer_head_dim * 4 <= hp.head_dim && hp.indexer_head_dim < 128)
      hp.indexer_head_dim *= 2;
    while (hp.indexer_head_dim < hp.n_rot) hp.indexer_head_dim *= 2;
    hp.n_indexer_head = std::min<int64_t>(64, 4 * hp.n_head);
    hp.indexer_top_k = std::clamp<int64_t>(hp.n_ctx / 64, 4, 512);
    hp.n_hc = 4;
    hp.swiglu_limit = hp.swiglu_limit_shared = 10.0f;  // the real models' clamp
  } else {
    if (o.head_dim_v > 0 && o.head_dim_v != hp.head_dim) {
      bad_option(
          "--head-dim-v differs from the key size: only multi-head latent attention "
          "(deepseek2) has different key and value sizes");
    }
    if (o.q_lora_rank >= 0 || o.kv_lora_rank >= 0) {
      bad_option("--q-lora and --kv-lora apply to multi-head latent attention (deepseek2) only");
    }
    // Partial rotary embeddings: rope turns the first n_rot dimensions of each head.
    hp.n_rot =
        o.rope_dim >= 0 ? o.rope_dim : std::max<int64_t>(2, hp.head_dim / d.rope_div / 2 * 2);
    if (hp.n_rot <= 0 || hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim) {
      bad_option("--rope-dim " + std::to_string(hp.n_rot) +
                 " must be even, positive and at most the head size " +
                 std::to_string(hp.head_dim));
    }
  }
  if (o.qk_norm >= 0 && !arch->qk_norm_optional) {
    bad_option("--qk-norm: " + o.arch + " has no optional q/k norm");
  }
  hp.qk_norm_absent = o.qk_norm == 0;
  if (arch->delta_net) {
    hp.delta_conv_kernel = 4;
    hp.delta_n_k_heads =
        o.delta_n_k_heads > 0 ? o.delta_n_k_heads : std::max<int64_t>(1, o.n_head / 2);
    hp.delta_n_v_heads = o.delta_n_v_heads > 0 ? o.delta_n_v_heads : o.n_head;
    hp.delta_head_k = hp.delta_head_v = o.delta_head_dim > 0 ? o.delta_head_dim : hp.head_dim;
    hp.full_attention_interval = arch->full_attention_interval > 0 ? arch->full_attention_interval
                                 : o.full_attention_interval > 0   ? o.full_attention_interval
                                                                   : 4;
    if (o.full_attention_interval > 0 && o.full_attention_interval != hp.full_attention_interval) {
      bad_option("--full-attention-interval: " + o.arch + " has every 4th layer full attention");
    }
    if (hp.delta_n_v_heads % hp.delta_n_k_heads != 0) {
      bad_option("--linear-v-heads " + std::to_string(hp.delta_n_v_heads) +
                 " is not a multiple of --linear-k-heads " + std::to_string(hp.delta_n_k_heads));
    }
  } else if (o.delta_n_k_heads > 0 || o.delta_n_v_heads > 0 || o.delta_head_dim > 0 ||
             o.full_attention_interval > 0) {
    bad_option("--linear-*, --full-attention-interval: " + o.arch +
               " has no Gated DeltaNet layers");
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    bad_option("--heads " + std::to_string(hp.n_head) + " is not a multiple of --kv-heads " +
               std::to_string(hp.n_head_kv));
  }
  hp.n_nextn = o.n_nextn >= 0 ? o.n_nextn : d.n_nextn;
  if (hp.n_nextn > 16) bad_option("--nextn is out of range (at most 16)");
  hp.tied_output = o.tied_output >= 0 ? o.tied_output != 0 : d.tied_output;

  // Sliding window: the row says which layers are local (compressed attention: every layer
  // has a window); a window for an architecture without local layers would be written and
  // never used.
  const bool has_swa = arch->swa_period > 0 || arch->layer_shapes || compressed;
  if (o.sliding_window > 0 && !has_swa) {
    bad_option("--window: " + o.arch + " has no sliding-window layers");
  }
  if (o.sliding_window == 0 && compressed) bad_option("--window: " + o.arch + " needs one");
  if (o.sliding_window == 0 && arch->layer_shapes) {
    bad_option("--window: " + o.arch + " needs a window for its sliding layers");
  }
  hp.sliding_window = o.sliding_window >= 0 ? o.sliding_window
                      : !has_swa
                          ? 0
                          : std::clamp<int64_t>(hp.n_ctx / d.window_ctx_div, 1, d.sliding_window);

  // Rope scaling, with the defaults of the real models.
  std::string scaling = o.rope_scaling;
  float factor = 1.0f, log_mul = 0.0f;
  int64_t orig = 0;
  if (scaling.empty()) {
    scaling = d.rope_scaling == RopeScaling::kYarn     ? "yarn"
              : d.rope_scaling == RopeScaling::kLinear ? "linear"
                                                       : "none";
    factor = d.rope_factor, orig = d.rope_original_ctx, log_mul = d.yarn_log_multiplier;
  } else if (scaling == "yarn") {
    factor = 4.0f, orig = std::max<int64_t>(1, hp.n_ctx / 4), log_mul = d.yarn_log_multiplier;
  } else if (scaling == "linear") {
    factor = 2.0f;
  }
  if (o.rope_factor > 0) factor = o.rope_factor;
  if (o.rope_original_ctx > 0) orig = o.rope_original_ctx;
  if (o.yarn_log_multiplier >= 0) log_mul = o.yarn_log_multiplier;
  if (scaling == "none") {
    if (o.rope_factor > 0 || o.rope_original_ctx > 0 || o.yarn_log_multiplier >= 0) {
      bad_option("--rope-factor, --rope-orig-ctx and --yarn-log-mul need --rope-scaling");
    }
    hp.rope_scaling = RopeScaling::kNone;
  } else if (scaling == "linear") {
    if (o.rope_original_ctx > 0 || o.yarn_log_multiplier >= 0) {
      bad_option("--rope-orig-ctx and --yarn-log-mul need --rope-scaling yarn");
    }
    hp.rope_scaling = RopeScaling::kLinear;
  } else if (scaling == "yarn") {
    hp.rope_scaling = RopeScaling::kYarn;
    hp.rope_original_ctx = orig;
    hp.yarn_log_multiplier = log_mul;
  } else {
    bad_option("--rope-scaling '" + scaling + "' is not one of none, linear, yarn");
  }
  if (hp.rope_scaling != RopeScaling::kNone) {
    if (!(factor > 0.0f) || factor > 1e6f) bad_option("--rope-factor is out of range");
    hp.rope_factor = factor;
  }

  hp.n_ff = o.n_ff > 0 ? o.n_ff : (3 * hp.n_embd + 63) / 64 * 64;
  const int64_t n_expert = o.n_expert >= 0 ? o.n_expert : d.n_expert;
  if (arch->moe || (arch->moe_beside_dense && n_expert > 0)) {
    hp.n_expert = n_expert;
    // The family's count, at most every expert of a small model.
    hp.n_expert_used =
        o.n_expert_used > 0 ? o.n_expert_used : std::min(d.n_expert_used, hp.n_expert);
    hp.n_leading_dense =
        o.n_leading_dense >= 0 ? o.n_leading_dense : std::min(d.n_leading_dense, hp.n_layer - 1);
    if (hp.n_leading_dense > hp.n_layer) bad_option("--dense-layers exceeds --layers");
    // With leading dense layers --ff is their width and the experts are narrower.
    hp.n_ff_expert = o.n_ff_expert > 0                       ? o.n_ff_expert
                     : o.n_ff > 0 && hp.n_leading_dense == 0 ? o.n_ff
                                                             : std::max<int64_t>(1, hp.n_embd / 2);
    if (hp.n_expert < 1 || hp.n_expert_used < 1 || hp.n_expert_used > hp.n_expert) {
      bad_option("need 1 <= --experts-used <= --experts");
    }
    if (hp.n_leading_dense == 0 && !arch->moe_beside_dense) hp.n_ff = 0;
    hp.n_expert_shared = o.n_expert_shared >= 0 ? o.n_expert_shared : d.n_expert_shared;
    if (hp.n_expert_shared > 64) bad_option("--shared-experts is out of range (at most 64)");
    // A gated shared expert is stated by its width (expert_shared_feed_forward_length).
    if (arch->shared_expert_gate) {
      if (hp.n_expert_shared != 1) bad_option("--shared-experts: " + o.arch + " has one");
      hp.n_ff_shared = hp.n_ff_expert;
    }
    const std::string gating = !o.gating.empty()                   ? o.gating
                               : d.gating == Gating::kSigmoid      ? "sigmoid"
                               : d.gating == Gating::kSqrtSoftplus ? "sqrt-softplus"
                                                                   : "softmax";
    if (gating == "softmax") {
      hp.gating = Gating::kSoftmax;
    } else if (gating == "sigmoid") {
      hp.gating = Gating::kSigmoid;
    } else if (gating == "sqrt-softplus") {
      hp.gating = Gating::kSqrtSoftplus;
    } else {
      bad_option("--gating '" + gating + "' is not one of softmax, sigmoid, sqrt-softplus");
    }
    // V3's sigmoid router (and V4's) carry a selection bias (exp_probs_b); V2's softmax one
    // does not.
    hp.expert_selection_bias = hp.gating != Gating::kSoftmax;
    hp.expert_weights_norm = hp.gating != Gating::kSoftmax || arch->default_expert_weights_norm;
    // V4 routes its first layers by token id (three of them in the real models).
    if (compressed) hp.n_hash_layers = std::min<int64_t>(3, hp.n_layer / 2);
    // The row's scale goes with the row's router (V3's 2.5 with its sigmoid, not V2's softmax).
    hp.expert_weights_scale = o.expert_weights_scale > 0 ? o.expert_weights_scale
                              : hp.gating == d.gating    ? d.expert_weights_scale
                                                         : 1.0f;
    hp.n_expert_group = o.n_expert_group > 0 ? o.n_expert_group : 1;
    hp.n_expert_group_used = o.n_expert_group_used > 0 ? o.n_expert_group_used
                             : o.n_expert_group > 0    ? std::max<int64_t>(1, hp.n_expert_group / 2)
                                                       : 1;
    if (hp.n_expert % hp.n_expert_group != 0 || hp.n_expert_group_used > hp.n_expert_group ||
        hp.n_expert_used > hp.n_expert_group_used * (hp.n_expert / hp.n_expert_group)) {
      bad_option("--expert-groups " + std::to_string(hp.n_expert_group) +
                 " / --expert-groups-used " + std::to_string(hp.n_expert_group_used) +
                 " do not fit " + std::to_string(hp.n_expert) + " experts with " +
                 std::to_string(hp.n_expert_used) + " used");
    }
  } else {
    for (auto [set, flag] : {std::pair{o.n_expert_shared >= 0, "--shared-experts"},
                             {o.n_leading_dense >= 0, "--dense-layers"},
                             {!o.gating.empty(), "--gating"},
                             {o.n_expert_group > 0, "--expert-groups"}}) {
      if (set) bad_option(std::string(flag) + ": " + o.arch + " has no mixture of experts");
    }
  }
  if (arch->layer_shapes) {
    layer_shapes(o, *arch, hp);
  } else if (o.n_embd_per_layer >= 0 || o.n_kv_shared >= 0 || o.sliding_period > 0) {
    bad_option("--per-layer-embd, --shared-kv-layers and --global-every are Gemma 4's (gemma4)");
  }
  return hp;
}

void synthesize(const SynthOptions& o) {
  const ArchSpec* arch = find_arch(o.arch);
  if (arch == nullptr) bad_option("unknown architecture '" + o.arch + "'");
  std::optional<FileType> ft = find_file_type(o.type);
  if (!ft) bad_option("unknown --type '" + o.type + "'");
  if (o.out_path.empty()) bad_option("no output path");

  gguf::Writer w;
  // Hyper-parameters depend on the vocabulary size, so the vocabulary is read first; its
  // keys are written after the hyper-parameters, as converters do.
  gguf::Writer vocab_keys;
  int64_t n_vocab = write_vocab(vocab_keys, o.vocab_path);
  if (!o.chat_template_path.empty()) {
    std::ifstream in(o.chat_template_path, std::ios::binary);
    if (!in) throw Error("synth", "cannot read the chat template '" + o.chat_template_path + "'");
    vocab_keys.set_string("tokenizer.chat_template",
                          std::string(std::istreambuf_iterator<char>(in), {}));
  }
  HParams hp = synth_hparams(o, n_vocab);
  write_hparams(w, *arch, hp, *ft);
  w.append(vocab_keys);

  std::vector<TensorSpec> specs = model_tensors(*arch, hp);
  // Proportional rope (Gemma 4's global layers): rope_freqs, not drawn (see the fill below).
  const float rotated = arch->synth.rope_freqs_rotated;
  if (rotated > 0) specs.push_back({"rope_freqs.weight", {hp.n_rot / 2}, TensorRole::kNorm});
  std::vector<TensorType> types;
  for (const TensorSpec& t : specs) {
    types.push_back(tensor_type_for(*ft, t, hp));
    w.add_tensor(t.name, types.back(), t.shape);
  }

  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  // attn_k_b / attn_v_b are not drawn: they are attn_kv_b's values cut per head, from the
  // same draws (see mla_source), so that the three agree exactly before quantization.
  std::vector<size_t> source(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    source[i] = i;
    const std::string& name = specs[i].name;
    if (hp.mla_kv_b && (name.ends_with(".attn_k_b.weight") || name.ends_with(".attn_v_b.weight"))) {
      const std::string kv_b = name.substr(0, name.rfind(".attn_")) + ".attn_kv_b.weight";
      for (size_t j = 0; j < specs.size(); ++j) {
        if (specs[j].name == kv_b) source[i] = j;
      }
      if (source[i] == i) bad_option("'" + name + "' has no attn_kv_b to be cut from");
    }
  }
  const int64_t nope = hp.head_dim - hp.n_rot, kv_lora = hp.kv_lora_rank, hdv = hp.head_dim_v;

  const uint64_t total = w.total_tensor_bytes();
  uint64_t done = 0;
  w.write(o.out_path, [&](size_t index, std::span<uint8_t> out) {
    const TensorSpec& t = specs[index];
    if (t.weight == LayerWeight::kHashExperts) {  // distinct expert ids per token id
      write_hash_experts(o.seed, index, t, hp, out);
      done += out.size();
      if (o.progress) o.progress(done, total);
      return;
    }
    const TypeTraits& traits = type_traits(types[index]);
    if (t.name == "rope_freqs.weight") {
      // The first `rotated` of the pairs turn; the others' angles are divided by 1e30 (the
      // converter's encoding of partial rotary).
      std::vector<float> freqs(static_cast<size_t>(t.shape[0]), 1e30f);
      const auto turning = static_cast<int64_t>(static_cast<float>(t.shape[0]) * rotated);
      std::fill_n(freqs.begin(), turning, 1.0f);
      traits.quantize(freqs.data(), out.data(), t.shape[0]);
      done += out.size();
      if (o.progress) o.progress(done, total);
      return;
    }
    const int64_t n_cols = t.shape[0];
    const int64_t n_rows = static_cast<int64_t>(t.shape.size() > 1 ? t.shape[1] : 1) *
                           (t.shape.size() > 2 ? t.shape[2] : 1);
    const size_t row_size = row_bytes(types[index], n_cols);
    const size_t from = source[index];
    Init init = init_for(specs[from], hp);
    if (is_block_output(t.name)) init.scale *= o.block_scale;
    const bool k_b = from != index && t.name.ends_with(".attn_k_b.weight");
    const bool v_b = from != index && !k_b;
    // Work is split in units: a row, or for attn_k_b a head (its kv_lora rows are the
    // transpose of the head's nope rows of attn_kv_b).
    const int64_t n_units = k_b ? hp.n_head : n_rows;
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(n_cols));
      std::vector<float> head, src(static_cast<size_t>(kv_lora));
      for (int64_t u = begin; u < end; ++u) {
        if (k_b) {
          // kv_b row h (nope + hdv) + j, column c -> k_b row h kv_lora + c, column j.
          head.resize(static_cast<size_t>(nope * kv_lora));
          for (int64_t j = 0; j < nope; ++j) {
            draw_row(o.seed, from, u * (nope + hdv) + j, init, src);
            for (int64_t c = 0; c < kv_lora; ++c) head[c * nope + j] = src[c];
          }
          for (int64_t c = 0; c < kv_lora; ++c) {
            traits.quantize(head.data() + c * nope,
                            out.data() + static_cast<size_t>(u * kv_lora + c) * row_size, nope);
          }
          continue;
        }
        // v_b row h hdv + j is kv_b row h (nope + hdv) + nope + j.
        const int64_t drawn = v_b ? u / hdv * (nope + hdv) + nope + u % hdv : u;
        draw_row(o.seed, from, drawn, init, row);
        traits.quantize(row.data(), out.data() + static_cast<size_t>(u) * row_size, n_cols);
      }
    };
    const int64_t n_threads =
        std::min<int64_t>(threads, std::max<int64_t>(1, k_b ? n_units : n_units / 16));
    std::vector<std::thread> pool;
    for (int64_t k = 1; k < n_threads; ++k) {
      pool.emplace_back(work, n_units * k / n_threads, n_units * (k + 1) / n_threads);
    }
    work(0, n_units / n_threads);
    for (std::thread& th : pool) th.join();
    done += out.size();
    if (o.progress) o.progress(done, total);
  });
}

}  // namespace herd
