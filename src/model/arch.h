// Architectures as rows of one table of options. The forward pass, the synthesizer and the
// planner read these switches; nothing outside this table branches on an architecture name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace herd {

// How rope rotates a head's dimensions.
enum class RopeStyle {
  kAdjacentPairs,  // (x0, x1), (x2, x3), ...: GPT-J / llama "normal" rope
  kNeoxHalves,     // (x0, x_{d/2}), (x1, x_{d/2+1}), ...: NeoX rope (qwen2, qwen3)
};

struct ArchSpec {
  std::string_view name;  // general.architecture
  RopeStyle rope_style;
  bool qkv_bias;           // attn_q/k/v carry biases (qwen2)
  bool qk_norm;            // per-head RMSNorm of q and k before rope (qwen3)
  bool moe;                // FFN is a mixture of experts (ffn_*_exps, ffn_gate_inp)
  bool explicit_head_dim;  // head size from attention.key_length, not n_embd / n_head
  float default_rms_eps;
  float default_rope_base;
};

// The row of general.architecture, or nullptr when herd does not know it.
const ArchSpec* find_arch(std::string_view name);
// Names of all known architectures, for help texts and errors.
std::vector<std::string_view> arch_names();

// Model hyper-parameters, as stored under "<arch>.*" in GGUF metadata.
struct HParams {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;  // dense FFN width (0 for MoE models)
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ctx = 0;  // training context length
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_expert = 0;
  bool tied_output = false;  // no output.weight: token_embd is also the output matrix
};

// What a weight is, so that type policies (the Q4_K_M mix) and loaders need not parse names.
enum class TensorRole {
  kEmbedding,
  kOutput,
  kNorm,
  kBias,
  kAttention,
  kAttentionValue,
  kFfn,
  kFfnDown,
  kRouter,
  kExperts,
  kExpertsDown
};

// Which range of a tensor-parallel rank's slice (model/tensor_slice.h) cuts a weight.
enum class SplitBy { kNone, kHeads, kKvHeads, kFf, kVocab };

struct TensorSpec {
  std::string name;            // GGUF name, e.g. "blk.3.attn_q.weight"
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the contiguous dimension
  TensorRole role;
  int layer = -1;  // -1 for tensors outside the blocks
  // A rank's slice keeps elements of dimension split_dim (0: columns, 1: rows) in its
  // `split` range (heads count head_dim elements each). Expert tensors (kExperts,
  // kExpertsDown) are also cut to the rank's experts along dimension 2.
  SplitBy split = SplitBy::kNone;
  int split_dim = 0;
};

// Every tensor a model of this architecture and shape has, in file order.
std::vector<TensorSpec> model_tensors(const ArchSpec& arch, const HParams& hp);

}  // namespace herd
