#include "model/arch.h"

namespace herd {
namespace {

constexpr auto kAdj = RopeStyle::kAdjacentPairs, kNeox = RopeStyle::kNeoxHalves;
constexpr auto kGqa = AttentionKind::kGqa, kMla = AttentionKind::kMla;
constexpr auto kPre = NormPlacement::kPre, kSandwich = NormPlacement::kSandwich;
constexpr auto kSilu = Activation::kSilu, kGelu = Activation::kGeluTanh;
constexpr auto kOai = Activation::kSwigluOai;
constexpr auto kSoftmax = Gating::kSoftmax;

// clang-format off
constexpr ArchSpec kArchs[] = {
  // name      rope   attn  norm       act    qkv_b  o_b    qk_n   sinks  moe    exp_b  head_d embd_s swa rope   yarn_l gating  w_norm ffn norm               eps    rope base
  {"llama",    kAdj,  kGqa, kPre,      kSilu, false, false, false, false, false, false, false, false, 0, 0.0f,    false, kSoftmax, true,  "ffn_norm",            1e-5f, 10000.0f},
  {"qwen2",    kNeox, kGqa, kPre,      kSilu, true,  false, false, false, false, false, false, false, 0, 0.0f,    false, kSoftmax, true,  "ffn_norm",            1e-6f, 1000000.0f},
  {"qwen3",    kNeox, kGqa, kPre,      kSilu, false, false, true,  false, false, false, true,  false, 0, 0.0f,    false, kSoftmax, true,  "ffn_norm",            1e-6f, 1000000.0f},
  {"qwen3moe", kNeox, kGqa, kPre,      kSilu, false, false, true,  false, true,  false, true,  false, 0, 0.0f,    false, kSoftmax, true,  "ffn_norm",            1e-6f, 1000000.0f},
  {"gemma3",   kNeox, kGqa, kSandwich, kGelu, false, false, true,  false, false, false, true,  true,  6, 10000.0f, false, kSoftmax, true,  "ffn_norm",            1e-6f, 1000000.0f},
  {"gpt-oss",  kNeox, kGqa, kPre,      kOai,  true,  true,  false, true,  true,  true,  true,  false, 2, 0.0f,    false, kSoftmax, true,  "post_attention_norm", 1e-5f, 150000.0f},
  {"deepseek2", kAdj, kMla, kPre,      kSilu, false, false, false, false, true,  false, true,  false, 0, 0.0f,    true,  kSoftmax, false, "ffn_norm",            1e-6f, 10000.0f},
};
// clang-format on

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

LayerOptions layer_options(const ArchSpec& arch, const HParams& hp, int64_t il) {
  LayerOptions o;
  o.moe = arch.moe && il >= hp.n_leading_dense;
  o.sliding = hp.sliding_window > 0 && arch.swa_period > 0 && (il + 1) % arch.swa_period != 0;
  o.rope_base = hp.rope_base;
  o.rope_scaling = hp.rope_scaling;
  if (o.sliding && arch.swa_rope_base > 0) {
    o.rope_base = arch.swa_rope_base;
    o.rope_scaling = RopeScaling::kNone;
  }
  return o;
}

std::vector<TensorSpec> model_tensors(const ArchSpec& arch, const HParams& hp) {
  const int64_t hd = hp.head_dim, hdv = hp.head_dim_v;
  const int64_t q_dim = hp.n_head * hd, o_dim = hp.n_head * hdv;
  // How a tensor-parallel slice cuts each weight (engine/shard.cpp packs exactly these).
  constexpr SplitBy kHeads = SplitBy::kHeads, kKv = SplitBy::kKvHeads;
  constexpr SplitBy kFf = SplitBy::kFf, kVocab = SplitBy::kVocab;
  constexpr TensorRole kNorm = TensorRole::kNorm, kBias = TensorRole::kBias;
  constexpr TensorRole kAttn = TensorRole::kAttention;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kEmbedding});
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerOptions lo = layer_options(arch, hp, il);
    auto blk = [il](const std::string& name) { return "blk." + std::to_string(il) + "." + name; };
    auto add = [&](const std::string& name, std::vector<int64_t> shape, TensorRole role,
                   SplitBy split = SplitBy::kNone, int dim = 0, int64_t unit = 1) {
      t.push_back({blk(name), std::move(shape), role, il, split, dim, unit});
    };
    add("attn_norm.weight", {hp.n_embd}, kNorm);
    if (arch.attention == AttentionKind::kMla) {
      const int64_t nope = hd - hp.n_rot, kv_lora = hp.kv_lora_rank;
      if (hp.q_lora_rank > 0) {
        add("attn_q_a.weight", {hp.n_embd, hp.q_lora_rank}, kAttn);
        add("attn_q_a_norm.weight", {hp.q_lora_rank}, kNorm);
        add("attn_q_b.weight", {hp.q_lora_rank, q_dim}, kAttn, kHeads, 1, hd);
      } else {
        add("attn_q.weight", {hp.n_embd, q_dim}, kAttn, kHeads, 1, hd);
      }
      add("attn_kv_a_mqa.weight", {hp.n_embd, kv_lora + hp.n_rot}, kAttn);
      add("attn_kv_a_norm.weight", {kv_lora}, kNorm);
      // (The shard reads attn_kv_b only when a file lacks attn_k_b / attn_v_b; it is still
      // listed, so that files keep it whole: a rank is shipped it too.)
      if (hp.mla_kv_b) {
        add("attn_kv_b.weight", {kv_lora, hp.n_head * (nope + hdv)}, kAttn, kHeads, 1, nope + hdv);
      }
      if (hp.mla_split_b && hp.mla_3d_b) {
        // Per head, as mainline's converter writes them: [nope, kv_lora, n_head] and
        // [kv_lora, hdv, n_head]. Not cut by tensor parallelism (the heads are dimension 2).
        add("attn_k_b.weight", {nope, kv_lora, hp.n_head}, kAttn);
        add("attn_v_b.weight", {kv_lora, hdv, hp.n_head}, TensorRole::kAttentionValue);
      } else if (hp.mla_split_b) {
        add("attn_k_b.weight", {nope, kv_lora * hp.n_head}, kAttn, kHeads, 1, kv_lora);
        add("attn_v_b.weight", {kv_lora, o_dim}, TensorRole::kAttentionValue, kHeads, 1, hdv);
      }
    } else {
      const int64_t kv_dim = hp.n_head_kv * hd, kv_dim_v = hp.n_head_kv * hdv;
      add("attn_q.weight", {hp.n_embd, q_dim}, kAttn, kHeads, 1, hd);
      add("attn_k.weight", {hp.n_embd, kv_dim}, kAttn, kKv, 1, hd);
      add("attn_v.weight", {hp.n_embd, kv_dim_v}, TensorRole::kAttentionValue, kKv, 1, hdv);
      if (arch.qkv_bias) {
        add("attn_q.bias", {q_dim}, kBias, kHeads, 0, hd);
        add("attn_k.bias", {kv_dim}, kBias, kKv, 0, hd);
        add("attn_v.bias", {kv_dim_v}, kBias, kKv, 0, hdv);
      }
      if (arch.qk_norm) {
        add("attn_q_norm.weight", {hd}, kNorm);
        add("attn_k_norm.weight", {hd}, kNorm);
      }
      if (arch.attn_sinks) add("attn_sinks.weight", {hp.n_head}, kBias, kHeads, 0, 1);
    }
    add("attn_output.weight", {o_dim, hp.n_embd}, kAttn, kHeads, 0, hdv);
    // Added once, after the ranks' partial sums are added up.
    if (arch.output_bias) add("attn_output.bias", {hp.n_embd}, kBias);
    if (arch.norm == NormPlacement::kSandwich)
      add("post_attention_norm.weight", {hp.n_embd}, kNorm);
    add(std::string(arch.ffn_norm) + ".weight", {hp.n_embd}, kNorm);
    if (lo.moe) {
      const int64_t ff = hp.n_ff_expert, ne = hp.n_expert;
      add("ffn_gate_inp.weight", {hp.n_embd, ne}, TensorRole::kRouter);
      if (arch.expert_bias) add("ffn_gate_inp.bias", {ne}, kBias);
      if (hp.expert_selection_bias) add("exp_probs_b.bias", {ne}, kBias);
      add("ffn_gate_exps.weight", {hp.n_embd, ff, ne}, TensorRole::kExperts, kFf, 1);
      t.back().per_expert = true;
      add("ffn_down_exps.weight", {ff, hp.n_embd, ne}, TensorRole::kExpertsDown, kFf, 0);
      t.back().per_expert = true;
      add("ffn_up_exps.weight", {hp.n_embd, ff, ne}, TensorRole::kExperts, kFf, 1);
      t.back().per_expert = true;
      if (arch.expert_bias) {
        // [rows, n_expert]: one row of bias per expert, cut like the experts' rows.
        add("ffn_gate_exps.bias", {ff, ne}, kBias, kFf, 0);
        t.back().per_expert = true;
        add("ffn_down_exps.bias", {hp.n_embd, ne}, kBias);
        t.back().per_expert = true;
        add("ffn_up_exps.bias", {ff, ne}, kBias, kFf, 0);
        t.back().per_expert = true;
      }
      if (hp.n_expert_shared > 0) {
        // Rows of the shared experts: cut in proportion to each expert's.
        const int64_t sh = ff * hp.n_expert_shared, unit = hp.n_expert_shared;
        add("ffn_gate_shexp.weight", {hp.n_embd, sh}, TensorRole::kFfn, kFf, 1, unit);
        add("ffn_down_shexp.weight", {sh, hp.n_embd}, TensorRole::kFfnDown, kFf, 0, unit);
        add("ffn_up_shexp.weight", {hp.n_embd, sh}, TensorRole::kFfn, kFf, 1, unit);
      }
    } else {
      // A dense layer of a model whose other layers are MoE is cut in proportion to the
      // experts' rows, which the slice's FFN range counts (0: it cannot be cut).
      const int64_t unit = !arch.moe                       ? 1
                           : hp.n_ff % hp.n_ff_expert == 0 ? hp.n_ff / hp.n_ff_expert
                                                           : 0;
      add("ffn_gate.weight", {hp.n_embd, hp.n_ff}, TensorRole::kFfn, kFf, 1, unit);
      add("ffn_down.weight", {hp.n_ff, hp.n_embd}, TensorRole::kFfnDown, kFf, 0, unit);
      add("ffn_up.weight", {hp.n_embd, hp.n_ff}, TensorRole::kFfn, kFf, 1, unit);
    }
    if (arch.norm == NormPlacement::kSandwich) add("post_ffw_norm.weight", {hp.n_embd}, kNorm);
  }
  t.push_back({"output_norm.weight", {hp.n_embd}, TensorRole::kNorm});
  if (!hp.tied_output) {
    t.push_back({"output.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kOutput, -1, kVocab, 1});
  }
  return t;
}

}  // namespace herd
