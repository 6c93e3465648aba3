#include "model/arch.h"

namespace herd {
namespace {

constexpr auto kNeox = RopeStyle::kNeoxHalves;
constexpr auto kMla = AttentionKind::kMla, kCompressed = AttentionKind::kCompressed;
constexpr auto kSandwich = NormPlacement::kSandwich;
constexpr auto kGelu = Activation::kGeluTanh, kOai = Activation::kSwigluOai;
constexpr auto kSigmoid = Gating::kSigmoid, kSqrtSoftplus = Gating::kSqrtSoftplus;
constexpr auto kLinear = RopeScaling::kLinear, kYarn = RopeScaling::kYarn;

// One row per architecture: what differs from llama (the defaults of ArchSpec). (GCC 12
// warns about the members a designated initializer leaves to their defaults, which is the
// point here.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
constexpr ArchSpec kArchs[] = {
    {.name = "llama"},
    {.name = "qwen2",
     .rope_style = kNeox,
     .qkv_bias = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f},
    {.name = "qwen3",
     .rope_style = kNeox,
     .qk_norm = true,
     .explicit_head_dim = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f},
    {.name = "qwen3moe",
     .rope_style = kNeox,
     .qk_norm = true,
     .moe = true,
     .explicit_head_dim = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f},
    {.name = "gemma3",
     .rope_style = kNeox,
     .norm = kSandwich,
     .activation = kGelu,
     .qk_norm = true,
     .explicit_head_dim = true,
     .embed_scale = true,
     .swa_period = 6,
     .swa_rope_base = 10000.0f,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f,
     .synth = {.tied_output = true,
               .rope_scaling = kLinear,
               .rope_factor = 8.0f,  // its global layers only
               .sliding_window = 512,
               .window_ctx_div = 8}},
    // Gemma 4 (26B-A4B with experts beside the dense MLP; E2B / E4B with per-layer inputs and
    // shared KV; 31B dense): the layers' shapes and kinds are the file's. synth: the 26B-A4B's
    // proportions (5 sliding layers then a global one, global heads twice as wide with a
    // quarter of the KV heads, 8 of the experts, a quarter of the global pairs rotated).
    {.name = "gemma4",
     .rope_style = kNeox,
     .norm = kSandwich,
     .activation = kGelu,
     .qk_norm = true,
     .explicit_head_dim = true,
     .embed_scale = true,
     .swa_rope_base = 10000.0f,
     .unit_attention_scale = true,
     .v_norm = true,
     .layer_shapes = true,
     .moe_beside_dense = true,
     .layer_output_scale = true,
     .default_final_softcap = 30.0f,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e6f,
     .synth = {.n_expert = 128,
               .n_expert_used = 8,
               .tied_output = true,
               .sliding_window = 1024,
               .window_ctx_div = 8,
               .rope_freqs_rotated = 0.25f,
               .sliding_period = 6,
               .global_head_dim_mul = 2,
               .global_kv_div = 4}},
    {.name = "gpt-oss",
     .rope_style = kNeox,
     .activation = kOai,
     .qkv_bias = true,
     .output_bias = true,
     .attn_sinks = true,
     .moe = true,
     .expert_bias = true,
     .explicit_head_dim = true,
     .swa_period = 2,
     .ffn_norm = "post_attention_norm",
     .default_rope_base = 150000.0f,
     .synth = {.n_expert_used = 4,
               .rope_scaling = kYarn,
               .rope_factor = 32.0f,
               .rope_original_ctx = 4096,
               .sliding_window = 128}},
    {.name = "deepseek2",
     .attention = kMla,
     .moe = true,
     .explicit_head_dim = true,
     .yarn_scale_on_logits = true,
     .default_expert_weights_norm = false,
     .default_rms_eps = 1e-6f,
     .synth = {.gating = kSigmoid,  // V3's router; V2's is softmax
               .n_expert_shared = 1,
               .n_leading_dense = 1,
               .expert_weights_scale = 2.5f,
               .rope_scaling = kYarn,
               .rope_factor = 40.0f,
               .rope_original_ctx = 4096,
               .yarn_log_multiplier = 0.1f}},
    // DeepSeek V4 (Flash / Pro): ../shared/models/frontier2/README.md.
    {.name = "deepseek4",
     .attention = kCompressed,
     .attn_sinks = true,
     .moe = true,
     .explicit_head_dim = true,
     .yarn_scale_on_logits = true,  // the reference cancels rope's magnitude factor
     .hyper_connections = true,
     .sparse_compress_ratio = 4,
     .default_gating = kSqrtSoftplus,
     .default_rms_eps = 1e-6f,
     .synth = {.gating = kSqrtSoftplus,
               .n_expert_shared = 1,
               .expert_weights_scale = 1.5f,
               .rope_scaling = kYarn,
               .rope_factor = 16.0f,
               .rope_original_ctx = 65536,
               .sliding_window = 128,
               .window_ctx_div = 2}},
    // GLM-4.5 / 4.6 / 4.7 and GLM-4.5-Air (no q/k norm).
    {.name = "glm4moe",
     .rope_style = kNeox,
     .qkv_bias = true,
     .qk_norm = true,
     .qk_norm_optional = true,
     .moe = true,
     .explicit_head_dim = true,
     .default_gating = kSigmoid,
     .default_expert_weights_norm = false,
     .expert_weights_scale_required = true,
     .ffn_norm = "post_attention_norm",
     .default_rope_base = 1e6f,
     .synth = {.gating = kSigmoid,
               .n_expert_shared = 1,
               .n_leading_dense = 1,  // Air's; GLM-4.5's is 3
               .expert_weights_scale = 2.5f,
               .n_nextn = 1,
               .head_dim = 128,
               .rope_div = 2}},
    // MiniMax-M2 / M2.1 / M2.5. Without expert_gating_func the reference routes with softmax.
    {.name = "minimax-m2",
     .rope_style = kNeox,
     .qk_norm = true,
     .qk_norm_whole_row = true,
     .moe = true,
     .explicit_head_dim = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 5e6f,
     .synth = {.gating = kSigmoid, .head_dim = 128, .rope_div = 2}},
    // GLM-5: DeepSeek's MLA in mainline's layout, the DSA indexer (kept, not run), GLM's MoE.
    {.name = "glm-dsa",
     .attention = kMla,
     .moe = true,
     .explicit_head_dim = true,
     .default_gating = kSigmoid,
     .default_expert_weights_norm = false,
     .expert_weights_scale_required = true,
     .dsa_indexer = true,
     .default_rope_base = 1e6f,
     .synth = {.gating = kSigmoid,
               .n_expert_shared = 1,
               .n_leading_dense = 3,
               .expert_weights_scale = 2.5f,
               .n_nextn = 1,
               .head_dim = 256,  // 192 nope + 64 rope
               .head_dim_v = 256,
               .rope_dim = 64,
               .kv_lora_rank = 512,
               .mla_mainline = true,
               .n_indexer_head = 32,
               .indexer_head_dim = 128,
               .indexer_top_k = 2048}},
    // Hybrid Gated DeltaNet / gated-attention stacks (3 linear layers to 1 full).
    {.name = "qwen35moe",
     .rope_style = kNeox,
     .qk_norm = true,
     .moe = true,
     .explicit_head_dim = true,
     .ffn_norm = "post_attention_norm",
     .delta_net = true,
     .delta_v_tiled = true,
     .attn_output_gate = true,
     .shared_expert_gate = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e7f,
     .synth = {.n_expert_used = 8,
               .n_expert_shared = 1,
               .n_nextn = 1,
               .rope_div = 4,
               .rope_sections = true}},
    {.name = "qwen35",
     .rope_style = kNeox,
     .qk_norm = true,
     .explicit_head_dim = true,
     .ffn_norm = "post_attention_norm",
     .delta_net = true,
     .delta_v_tiled = true,
     .attn_output_gate = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e7f,
     .synth = {.n_nextn = 1, .rope_div = 4, .rope_sections = true}},
    {.name = "qwen3next",
     .rope_style = kNeox,
     .qk_norm = true,
     .moe = true,
     .explicit_head_dim = true,
     .ffn_norm = "post_attention_norm",
     .delta_net = true,
     .full_attention_interval = 4,
     .delta_ba_fused = true,
     .attn_output_gate = true,
     .shared_expert_gate = true,
     .default_rms_eps = 1e-6f,
     .default_rope_base = 1e7f,
     .synth = {.n_expert_used = 10, .n_expert_shared = 1, .rope_div = 4}},
};
#pragma GCC diagnostic pop

}  // namespace

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec& a : kArchs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::vector<std::string_view> arch_names() {
  std::vector<std::string_view> names;
  for (const ArchSpec& a : kArchs) names.push_back(a.name);
  return names;
}

namespace {

// Layer il attends to the last hp.sliding_window positions only: the file's pattern, or
// the row's period.
bool is_sliding(const ArchSpec& arch, const HParams& hp, int64_t il) {
  if (hp.sliding_window <= 0) return false;
  if (!hp.swa_layers.empty()) {
    return il < static_cast<int64_t>(hp.swa_layers.size()) &&
           hp.swa_layers[static_cast<size_t>(il)] != 0;
  }
  return arch.swa_period > 0 && (il + 1) % arch.swa_period != 0;
}

}  // namespace

LayerOptions layer_options(const ArchSpec& arch, const HParams& hp, int64_t il) {
  LayerOptions o;
  const auto i = static_cast<size_t>(il);
  o.moe = hp.n_expert > 0 && il >= hp.n_leading_dense;
  o.nextn = il >= hp.n_layer;
  o.nextn_run = !o.nextn && il >= hp.n_layer - hp.n_nextn_run;
  o.sliding = is_sliding(arch, hp, il);
  o.rope_base = hp.rope_base;
  o.rope_scaling = hp.rope_scaling;
  if (arch.delta_net) {
    const int64_t every = arch.full_attention_interval > 0 ? arch.full_attention_interval
                                                           : hp.full_attention_interval;
    // A NextN block has full attention.
    o.linear = !o.nextn && !o.nextn_run && every > 0 && (il + 1) % every != 0;
  }
  o.head_dim = hp.head_dim;
  o.head_dim_v = hp.head_dim_v;
  o.n_head_kv = i < hp.n_head_kv_of.size() ? hp.n_head_kv_of[i] : hp.n_head_kv;
  o.n_rot = hp.n_rot;
  o.n_ff = i < hp.n_ff_of.size() ? hp.n_ff_of[i] : hp.n_ff;
  o.kv_layer = il;
  if (o.sliding && arch.swa_rope_base > 0) {
    // Their own rope: base, no scaling, no rope_freqs (those are the global layers').
    o.rope_base = hp.rope_base_swa > 0 ? hp.rope_base_swa : arch.swa_rope_base;
    o.rope_scaling = RopeScaling::kNone;
    o.rope_freqs = false;
    if (hp.head_dim_swa > 0) o.head_dim = o.head_dim_v = hp.head_dim_swa;
    if (hp.n_rot_swa > 0) o.n_rot = hp.n_rot_swa;
  }
  o.has_v = o.sliding || !hp.global_v_is_k;
  // The last n_kv_shared layers cache nothing: they read the keys and values of the last
  // earlier layer of their kind (the reference: the last two layers before them, which must
  // be one sliding and one global). -1: there is none (read_model_info refuses it).
  const int64_t first_shared = hp.n_layer - hp.n_kv_shared;
  if (hp.n_kv_shared > 0 && il >= first_shared && !o.nextn) {
    o.own_kv = false;
    o.kv_layer = -1;
    for (int64_t j = first_shared - 1; j >= 0 && o.kv_layer < 0; --j) {
      if (is_sliding(arch, hp, j) == o.sliding) o.kv_layer = j;
    }
  }
  if (arch.attention == AttentionKind::kCompressed) {
    // Every layer attends to its window; compressed layers add their entries and rope with
    // their own base and the scaling, window-only layers with the plain base and none.
    o.sliding = true;
    o.compress_ratio = i < hp.compress_ratios.size() ? hp.compress_ratios[i] : 0;
    o.compress_indexed = o.compress_ratio > 0 && o.compress_ratio == arch.sparse_compress_ratio;
    if (o.compress_ratio > 0) {
      o.rope_base = hp.compress_rope_base;
    } else {
      o.rope_scaling = RopeScaling::kNone;
    }
  }
  o.hash_routed = o.moe && il < hp.n_hash_layers;
  return o;
}

bool state_cuts_back(const ArchSpec& arch) {
  return !arch.delta_net && arch.attention != AttentionKind::kCompressed;
}

std::string tensor_alias(std::string_view name) {
  static constexpr std::pair<std::string_view, std::string_view> kSpellings[] = {
      {"output_hc_", "hc_head_"},
      {"attn_compressor_", "attn_compress_"},
      {"indexer_compressor_", "indexer.compress_"},
  };
  for (const auto& [ours, theirs] : kSpellings) {
    const size_t at = name.find(ours);
    if (at != std::string_view::npos) {
      return std::string(name.substr(0, at)) + std::string(theirs) +
             std::string(name.substr(at + ours.size()));
    }
  }
  return {};
}

std::vector<TensorSpec> model_tensors(const ArchSpec& arch, const HParams& hp) {
  // How a tensor-parallel slice cuts each weight (engine/shard.cpp packs exactly these).
  constexpr SplitBy kHeads = SplitBy::kHeads, kKv = SplitBy::kKvHeads;
  constexpr SplitBy kFf = SplitBy::kFf, kVocab = SplitBy::kVocab;
  constexpr TensorRole kNorm = TensorRole::kNorm, kBias = TensorRole::kBias;
  constexpr TensorRole kAttn = TensorRole::kAttention, kAttnV = TensorRole::kAttentionValue;
  using W = LayerWeight;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kEmbedding});
  if (hp.n_embd_per_layer > 0) {
    // Per-layer inputs: every stage computes its layers' own from the token ids.
    const int64_t all = hp.n_embd_per_layer * hp.n_layer;
    t.push_back({"per_layer_token_embd.weight", {all, hp.n_vocab}, TensorRole::kFfn});
    t.push_back({"per_layer_model_proj.weight", {hp.n_embd, all}, TensorRole::kFfn});
    t.push_back({"per_layer_proj_norm.weight", {hp.n_embd_per_layer}, TensorRole::kNorm});
  }
  for (int il = 0; il < hp.n_layer + hp.n_nextn; ++il) {
    const LayerOptions lo = layer_options(arch, hp, il);
    const int64_t hd = lo.head_dim, hdv = lo.head_dim_v;
    const int64_t q_dim = hp.n_head * hd, o_dim = hp.n_head * hdv;
    // Block tensor `name` of `shape` loading into `weight`; a rank keeps units
    // [begin, end) of `split` along dimension `dim`, `unit` elements each. A NextN block
    // belongs to no stage's layers and is never cut (layer -1, whole).
    auto add = [&](W weight, const std::string& name, std::vector<int64_t> shape, TensorRole role,
                   SplitBy split = SplitBy::kNone, int dim = 0, int64_t unit = 1) {
      if (lo.nextn) weight = W::kNone, split = SplitBy::kNone, dim = 0, unit = 1;
      t.push_back({"blk." + std::to_string(il) + "." + name, std::move(shape), role,
                   lo.nextn ? -1 : il, split, dim, unit, false, weight});
    };
    // An expert tensor: its last dimension counts experts, of which a rank keeps its own.
    auto add_experts = [&](W weight, const std::string& name, std::vector<int64_t> shape,
                           TensorRole role, SplitBy split = SplitBy::kNone, int dim = 0) {
      add(weight, name, std::move(shape), role, split, dim);
      t.back().per_expert = !lo.nextn;
    };
    if (arch.hyper_connections) {
      // Kept f32 by quantizers (the role of a router): they mix the residual streams.
      const int64_t flat = hp.hidden_width(), mixes = hp.n_hc_mixes();
      for (const char* part : {"attn", "ffn"}) {
        const bool attn = part[0] == 'a';
        const std::string p = std::string("hc_") + part;
        add(attn ? W::kHcAttnFn : W::kHcFfnFn, p + "_fn.weight", {flat, mixes},
            TensorRole::kRouter);
        add(attn ? W::kHcAttnScale : W::kHcFfnScale, p + "_scale.weight", {3}, kNorm);
        add(attn ? W::kHcAttnBase : W::kHcFfnBase, p + "_base.weight", {mixes}, kBias);
      }
    }
    add(W::kAttnNorm, "attn_norm.weight", {hp.n_embd}, kNorm);
    if (arch.attention == AttentionKind::kCompressed) {
      // Not cut by tensor parallelism: one latent head, and output groups over the heads.
      const int64_t group = q_dim / hp.n_out_group, o_rows = hp.n_out_group * hp.o_lora_rank;
      add(W::kAttnQA, "attn_q_a.weight", {hp.n_embd, hp.q_lora_rank}, kAttn);
      add(W::kAttnQANorm, "attn_q_a_norm.weight", {hp.q_lora_rank}, kNorm);
      add(W::kAttnQB, "attn_q_b.weight", {hp.q_lora_rank, q_dim}, kAttn);
      add(W::kAttnKv, "attn_kv.weight", {hp.n_embd, hd}, kAttn);
      add(W::kAttnKvANorm, "attn_kv_a_norm.weight", {hd}, kNorm);
      add(W::kAttnSinks, "attn_sinks.weight", {hp.n_head}, kBias);
      add(W::kAttnOutputA, "attn_output_a.weight", {group, o_rows}, kAttnV);
      add(W::kAttnOutputB, "attn_output_b.weight", {o_rows, hp.n_embd}, kAttn);
      if (lo.compress_ratio > 0) {
        const int64_t width = lo.compress_indexed ? 2 * hd : hd, r = lo.compress_ratio;
        add(W::kCompKv, "attn_compressor_kv.weight", {hp.n_embd, width}, kAttn);
        add(W::kCompGate, "attn_compressor_gate.weight", {hp.n_embd, width}, kAttn);
        add(W::kCompApe, "attn_compressor_ape.weight", {width, r}, kAttn);
        add(W::kCompNorm, "attn_compressor_norm.weight", {hd}, kNorm);
      }
      if (lo.compress_indexed) {
        const int64_t di = hp.indexer_head_dim, r = lo.compress_ratio;
        add(W::kIndexerQB, "indexer.attn_q_b.weight", {hp.q_lora_rank, hp.n_indexer_head * di},
            kAttn);
        add(W::kIndexerProj, "indexer.proj.weight", {hp.n_embd, hp.n_indexer_head}, kAttn);
        add(W::kIndexerCompKv, "indexer_compressor_kv.weight", {hp.n_embd, 2 * di}, kAttn);
        add(W::kIndexerCompGate, "indexer_compressor_gate.weight", {hp.n_embd, 2 * di}, kAttn);
        add(W::kIndexerCompApe, "indexer_compressor_ape.weight", {2 * di, r}, kAttn);
        add(W::kIndexerCompNorm, "indexer_compressor_norm.weight", {di}, kNorm);
      }
    } else if (lo.linear) {
      // Gated DeltaNet. Listed whole (shipped and counted so); a tensor-parallel rank's
      // loader keeps the rows and columns of its V heads (engine/shard_linear.cpp).
      const int64_t n_v = hp.delta_n_v_heads, dv = hp.delta_head_v;
      const int64_t conv_dim = 2 * hp.delta_n_k_heads * hp.delta_head_k + n_v * dv;
      add(W::kDeltaQkv, "attn_qkv.weight", {hp.n_embd, conv_dim}, kAttn);
      add(W::kDeltaZ, "attn_gate.weight", {hp.n_embd, n_v * dv}, kAttn);
      if (arch.delta_ba_fused) {
        add(W::kDeltaBa, "ssm_ba.weight", {hp.n_embd, 2 * n_v}, kAttn);
      } else {
        add(W::kDeltaBeta, "ssm_beta.weight", {hp.n_embd, n_v}, kAttn);
        add(W::kDeltaAlpha, "ssm_alpha.weight", {hp.n_embd, n_v}, kAttn);
      }
      // Kept f32 by the converter and the quantizer, as biases are.
      add(W::kDeltaConv, "ssm_conv1d.weight", {hp.delta_conv_kernel, conv_dim}, kBias);
      add(W::kDeltaDtBias, "ssm_dt.bias", {n_v}, kBias);
      add(W::kDeltaA, "ssm_a", {n_v}, kBias);
      add(W::kDeltaNorm, "ssm_norm.weight", {dv}, kNorm);
      add(W::kDeltaOut, "ssm_out.weight", {n_v * dv, hp.n_embd}, kAttnV);
    } else if (arch.attention == AttentionKind::kMla) {
      const int64_t nope = hd - hp.n_rot, kv_lora = hp.kv_lora_rank;
      if (hp.q_lora_rank > 0) {
        add(W::kAttnQA, "attn_q_a.weight", {hp.n_embd, hp.q_lora_rank}, kAttn);
        add(W::kAttnQANorm, "attn_q_a_norm.weight", {hp.q_lora_rank}, kNorm);
        add(W::kAttnQB, "attn_q_b.weight", {hp.q_lora_rank, q_dim}, kAttn, kHeads, 1, hd);
      } else {
        add(W::kAttnQB, "attn_q.weight", {hp.n_embd, q_dim}, kAttn, kHeads, 1, hd);
      }
      add(W::kAttnKvA, "attn_kv_a_mqa.weight", {hp.n_embd, kv_lora + hp.n_rot}, kAttn);
      add(W::kAttnKvANorm, "attn_kv_a_norm.weight", {kv_lora}, kNorm);
      // (The shard reads attn_kv_b only when a file lacks attn_k_b / attn_v_b; it is still
      // listed, so that files keep it whole: a rank is shipped it too.)
      if (hp.mla_kv_b) {
        add(W::kAttnKvB, "attn_kv_b.weight", {kv_lora, hp.n_head * (nope + hdv)}, kAttn, kHeads, 1,
            nope + hdv);
      }
      if (hp.mla_split_b && hp.mla_3d_b) {
        // Per head, as mainline's converter writes them: [nope, kv_lora, n_head] and
        // [kv_lora, hdv, n_head]. Not cut by tensor parallelism (the heads are dimension 2).
        add(W::kAttnKB, "attn_k_b.weight", {nope, kv_lora, hp.n_head}, kAttn);
        add(W::kAttnVB, "attn_v_b.weight", {kv_lora, hdv, hp.n_head}, kAttnV);
      } else if (hp.mla_split_b) {
        add(W::kAttnKB, "attn_k_b.weight", {nope, kv_lora * hp.n_head}, kAttn, kHeads, 1, kv_lora);
        add(W::kAttnVB, "attn_v_b.weight", {kv_lora, o_dim}, kAttnV, kHeads, 1, hdv);
      }
    } else {
      const int64_t kv_dim = lo.n_head_kv * hd, kv_dim_v = lo.n_head_kv * hdv;
      // Gated attention: each head's rows are [q | gate].
      const int64_t q_rows = arch.attn_output_gate ? 2 * hd : hd;
      add(W::kAttnQ, "attn_q.weight", {hp.n_embd, hp.n_head * q_rows}, kAttn, kHeads, 1, q_rows);
      if (lo.own_kv) {
        add(W::kAttnK, "attn_k.weight", {hp.n_embd, kv_dim}, kAttn, kKv, 1, hd);
        if (lo.has_v) add(W::kAttnV, "attn_v.weight", {hp.n_embd, kv_dim_v}, kAttnV, kKv, 1, hdv);
      }
      if (arch.qkv_bias) {
        add(W::kAttnQBias, "attn_q.bias", {q_dim}, kBias, kHeads, 0, hd);
        add(W::kAttnKBias, "attn_k.bias", {kv_dim}, kBias, kKv, 0, hd);
        add(W::kAttnVBias, "attn_v.bias", {kv_dim_v}, kBias, kKv, 0, hdv);
      }
      if (arch.qk_norm && !hp.qk_norm_absent && arch.qk_norm_whole_row) {
        // One weight per element of the whole row: cut with the heads.
        add(W::kAttnQNorm, "attn_q_norm.weight", {q_dim}, kNorm, kHeads, 0, hd);
        if (lo.own_kv) add(W::kAttnKNorm, "attn_k_norm.weight", {kv_dim}, kNorm, kKv, 0, hd);
      } else if (arch.qk_norm && !hp.qk_norm_absent) {
        // Per head, the same for every head: whole on every rank.
        add(W::kAttnQNorm, "attn_q_norm.weight", {hd}, kNorm);
        if (lo.own_kv) add(W::kAttnKNorm, "attn_k_norm.weight", {hd}, kNorm);
      }
      if (arch.attn_sinks) add(W::kAttnSinks, "attn_sinks.weight", {hp.n_head}, kBias, kHeads, 0);
    }
    if (!lo.linear && arch.attention != AttentionKind::kCompressed) {
      add(W::kAttnOutput, "attn_output.weight", {o_dim, hp.n_embd}, kAttn, kHeads, 0, hdv);
    }
    if (arch.dsa_indexer) {
      // Kept, not run (ArchSpec::dsa_indexer): no layer member, whole on every rank.
      const int64_t ih = hp.n_indexer_head, id = hp.indexer_head_dim;
      add(W::kNone, "indexer.k_norm.weight", {id}, kNorm);
      add(W::kNone, "indexer.k_norm.bias", {id}, kBias);
      add(W::kNone, "indexer.proj.weight", {hp.n_embd, ih}, kAttn);
      add(W::kNone, "indexer.attn_k.weight", {hp.n_embd, id}, kAttn);
      add(W::kNone, "indexer.attn_q_b.weight", {hp.q_lora_rank, ih * id}, kAttn);
    }
    // Added once, after the ranks' partial sums are added up.
    if (arch.output_bias) add(W::kAttnOutputBias, "attn_output.bias", {hp.n_embd}, kBias);
    if (arch.norm == NormPlacement::kSandwich) {
      add(W::kPostAttnNorm, "post_attention_norm.weight", {hp.n_embd}, kNorm);
    }
    add(W::kFfnNorm, std::string(arch.ffn_norm) + ".weight", {hp.n_embd}, kNorm);
    // The dense FFN (n_ff rows) of a dense layer or of one whose experts run beside it.
    auto add_dense_ffn = [&](int64_t n_ff) {
      // A dense layer of a model whose other layers are MoE is cut in proportion to the
      // experts' rows, which the slice's FFN range counts (0: it cannot be cut).
      const int64_t unit = hp.n_expert == 0             ? 1
                           : n_ff % hp.n_ff_expert == 0 ? n_ff / hp.n_ff_expert
                                                        : 0;
      add(W::kFfnGate, "ffn_gate.weight", {hp.n_embd, n_ff}, TensorRole::kFfn, kFf, 1, unit);
      add(W::kFfnDown, "ffn_down.weight", {n_ff, hp.n_embd}, TensorRole::kFfnDown, kFf, 0, unit);
      add(W::kFfnUp, "ffn_up.weight", {hp.n_embd, n_ff}, TensorRole::kFfn, kFf, 1, unit);
    };
    if (lo.moe && arch.moe_beside_dense) {
      // Gemma 4: the layer's MLP, then its experts (whole rows: the fused gate and up rows
      // of an expert are not one range of a slice's FFN rows).
      const int64_t ff = hp.n_ff_expert, ne = hp.n_expert;
      add_dense_ffn(lo.n_ff);
      add(W::kPostFfnNorm, "post_ffw_norm.weight", {hp.n_embd}, kNorm);
      add(W::kRouter, "ffn_gate_inp.weight", {hp.n_embd, ne}, TensorRole::kRouter);
      add(W::kRouterScale, "ffn_gate_inp.scale", {hp.n_embd}, kNorm);
      add(W::kPreFfnNorm2, "pre_ffw_norm_2.weight", {hp.n_embd}, kNorm);
      add(W::kPostFfnNorm1, "post_ffw_norm_1.weight", {hp.n_embd}, kNorm);
      add(W::kPostFfnNorm2, "post_ffw_norm_2.weight", {hp.n_embd}, kNorm);
      add_experts(W::kGateUpExps, "ffn_gate_up_exps.weight", {hp.n_embd, 2 * ff, ne},
                  TensorRole::kExperts);
      add_experts(W::kDownExps, "ffn_down_exps.weight", {ff, hp.n_embd, ne},
                  TensorRole::kExpertsDown);
      // [n_expert], whole on every rank (indexed by expert id).
      add(W::kDownExpsScale, "ffn_down_exps.scale", {ne}, kNorm);
    } else if (lo.moe) {
      const int64_t ff = hp.n_ff_expert, ne = hp.n_expert;
      add(W::kRouter, "ffn_gate_inp.weight", {hp.n_embd, ne}, TensorRole::kRouter);
      if (arch.expert_bias) add(W::kRouterBias, "ffn_gate_inp.bias", {ne}, kBias);
      if (lo.hash_routed) {
        // int32 expert ids per token id (kept as they are: the role of a router).
        add(W::kHashExperts, "ffn_gate_tid2eid.weight", {hp.n_expert_used, hp.n_vocab},
            TensorRole::kRouter);
      } else if (hp.expert_selection_bias) {
        add(W::kSelectionBias, "exp_probs_b.bias", {ne}, kBias);
      }
      add_experts(W::kGateExps, "ffn_gate_exps.weight", {hp.n_embd, ff, ne}, TensorRole::kExperts,
                  kFf, 1);
      add_experts(W::kDownExps, "ffn_down_exps.weight", {ff, hp.n_embd, ne},
                  TensorRole::kExpertsDown, kFf, 0);
      add_experts(W::kUpExps, "ffn_up_exps.weight", {hp.n_embd, ff, ne}, TensorRole::kExperts, kFf,
                  1);
      if (arch.expert_bias) {
        // [rows, n_expert]: one row of bias per expert, cut like the experts' rows.
        add_experts(W::kGateExpsBias, "ffn_gate_exps.bias", {ff, ne}, kBias, kFf, 0);
        add_experts(W::kDownExpsBias, "ffn_down_exps.bias", {hp.n_embd, ne}, kBias);
        add_experts(W::kUpExpsBias, "ffn_up_exps.bias", {ff, ne}, kBias, kFf, 0);
      }
      if (hp.n_expert_shared > 0) {
        // Rows of the shared experts: cut in proportion to each expert's (0: they cannot
        // be).
        const int64_t sh = hp.n_ff_shared > 0 ? hp.n_ff_shared : ff * hp.n_expert_shared;
        const int64_t unit = sh % ff == 0 ? sh / ff : 0;
        if (arch.shared_expert_gate) {
          add(W::kSharedExpertGate, "ffn_gate_inp_shexp.weight", {hp.n_embd}, kNorm);
        }
        add(W::kFfnGate, "ffn_gate_shexp.weight", {hp.n_embd, sh}, TensorRole::kFfn, kFf, 1, unit);
        add(W::kFfnDown, "ffn_down_shexp.weight", {sh, hp.n_embd}, TensorRole::kFfnDown, kFf, 0,
            unit);
        add(W::kFfnUp, "ffn_up_shexp.weight", {hp.n_embd, sh}, TensorRole::kFfn, kFf, 1, unit);
      }
    } else {
      add_dense_ffn(lo.n_ff);
    }
    if (arch.norm == NormPlacement::kSandwich && !(lo.moe && arch.moe_beside_dense)) {
      add(W::kPostFfnNorm, "post_ffw_norm.weight", {hp.n_embd}, kNorm);
    }
    if (hp.n_embd_per_layer > 0 && !lo.nextn) {
      const int64_t p = hp.n_embd_per_layer;
      add(W::kPerLayerGate, "inp_gate.weight", {hp.n_embd, p}, TensorRole::kFfn);
      add(W::kPerLayerProj, "proj.weight", {p, hp.n_embd}, TensorRole::kFfnDown);
      add(W::kPerLayerPostNorm, "post_norm.weight", {hp.n_embd}, kNorm);
    }
    if (arch.layer_output_scale && !lo.nextn) {
      add(W::kLayerOutputScale, "layer_output_scale.weight", {1}, kNorm);
    }
    if (lo.nextn || lo.nextn_run) {
      // The MTP head's own parts: the projection of [embedding | hidden] and its norms
      // (the optional nextn.embed_tokens / shared_head_head default to the model's).
      add(W::kNone, "nextn.eh_proj.weight", {2 * hp.n_embd, hp.n_embd}, TensorRole::kFfn);
      add(W::kNone, "nextn.enorm.weight", {hp.n_embd}, kNorm);
      add(W::kNone, "nextn.hnorm.weight", {hp.n_embd}, kNorm);
      add(W::kNone, "nextn.shared_head_norm.weight", {hp.n_embd}, kNorm);
    }
  }
  if (arch.hyper_connections) {
    t.push_back({"output_hc_fn.weight", {hp.hidden_width(), hp.n_hc}, TensorRole::kRouter});
    t.push_back({"output_hc_scale.weight", {1}, TensorRole::kNorm});
    t.push_back({"output_hc_base.weight", {hp.n_hc}, TensorRole::kBias});
  }
  t.push_back({"output_norm.weight", {hp.n_embd}, TensorRole::kNorm});
  if (!hp.tied_output) {
    t.push_back({"output.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kOutput, -1, kVocab, 1});
  }
  return t;
}

}  // namespace herd
