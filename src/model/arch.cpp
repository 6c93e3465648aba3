#include "model/arch.h"

namespace herd {
namespace {

// clang-format off
constexpr ArchSpec kArchs[] = {
  // name        rope style                 qkv_bias qk_norm moe    head_dim eps    rope base
  {"llama",    RopeStyle::kAdjacentPairs, false,   false,  false, false,   1e-5f, 10000.0f},
  {"qwen2",    RopeStyle::kNeoxHalves,    true,    false,  false, false,   1e-6f, 1000000.0f},
  {"qwen3",    RopeStyle::kNeoxHalves,    false,   true,   false, true,    1e-6f, 1000000.0f},
  {"qwen3moe", RopeStyle::kNeoxHalves,    false,   true,   true,  true,    1e-6f, 1000000.0f},
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

std::vector<TensorSpec> model_tensors(const ArchSpec& arch, const HParams& hp) {
  const int64_t q_dim = hp.n_head * hp.head_dim;
  const int64_t kv_dim = hp.n_head_kv * hp.head_dim;
  // How a tensor-parallel slice cuts each weight (engine/shard.cpp packs exactly these).
  constexpr SplitBy kHeads = SplitBy::kHeads, kKv = SplitBy::kKvHeads, kFf = SplitBy::kFf;
  constexpr SplitBy kVocab = SplitBy::kVocab;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kEmbedding});
  for (int il = 0; il < hp.n_layer; ++il) {
    auto blk = [il](const char* name) { return "blk." + std::to_string(il) + "." + name; };
    t.push_back({blk("attn_norm.weight"), {hp.n_embd}, TensorRole::kNorm, il});
    t.push_back({blk("attn_q.weight"), {hp.n_embd, q_dim}, TensorRole::kAttention, il, kHeads, 1});
    t.push_back({blk("attn_k.weight"), {hp.n_embd, kv_dim}, TensorRole::kAttention, il, kKv, 1});
    t.push_back(
        {blk("attn_v.weight"), {hp.n_embd, kv_dim}, TensorRole::kAttentionValue, il, kKv, 1});
    if (arch.qkv_bias) {
      t.push_back({blk("attn_q.bias"), {q_dim}, TensorRole::kBias, il, kHeads, 0});
      t.push_back({blk("attn_k.bias"), {kv_dim}, TensorRole::kBias, il, kKv, 0});
      t.push_back({blk("attn_v.bias"), {kv_dim}, TensorRole::kBias, il, kKv, 0});
    }
    if (arch.qk_norm) {
      t.push_back({blk("attn_q_norm.weight"), {hp.head_dim}, TensorRole::kNorm, il});
      t.push_back({blk("attn_k_norm.weight"), {hp.head_dim}, TensorRole::kNorm, il});
    }
    t.push_back(
        {blk("attn_output.weight"), {q_dim, hp.n_embd}, TensorRole::kAttention, il, kHeads, 0});
    t.push_back({blk("ffn_norm.weight"), {hp.n_embd}, TensorRole::kNorm, il});
    if (arch.moe) {
      const int64_t ff = hp.n_ff_expert, ne = hp.n_expert;
      t.push_back({blk("ffn_gate_inp.weight"), {hp.n_embd, ne}, TensorRole::kRouter, il});
      t.push_back(
          {blk("ffn_gate_exps.weight"), {hp.n_embd, ff, ne}, TensorRole::kExperts, il, kFf, 1});
      t.push_back(
          {blk("ffn_down_exps.weight"), {ff, hp.n_embd, ne}, TensorRole::kExpertsDown, il, kFf, 0});
      t.push_back(
          {blk("ffn_up_exps.weight"), {hp.n_embd, ff, ne}, TensorRole::kExperts, il, kFf, 1});
    } else {
      t.push_back({blk("ffn_gate.weight"), {hp.n_embd, hp.n_ff}, TensorRole::kFfn, il, kFf, 1});
      t.push_back({blk("ffn_down.weight"), {hp.n_ff, hp.n_embd}, TensorRole::kFfnDown, il, kFf, 0});
      t.push_back({blk("ffn_up.weight"), {hp.n_embd, hp.n_ff}, TensorRole::kFfn, il, kFf, 1});
    }
  }
  t.push_back({"output_norm.weight", {hp.n_embd}, TensorRole::kNorm});
  if (!hp.tied_output) {
    t.push_back({"output.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kOutput, -1, kVocab, 1});
  }
  return t;
}

}  // namespace herd
