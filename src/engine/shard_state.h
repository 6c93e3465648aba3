// The inside of a Shard: its weights per layer, KV cache and scratch, shared by the files of
// the forward pass (shard.cpp: loading and the layer loop; shard_attention.cpp;
// shard_ffn.cpp). Internal to the engine module.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/ops.h"
#include "engine/router.h"
#include "engine/shard.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

namespace herd::engine {

using kernels::PackedMatrix;

// A run of the slice's query heads that read the same KV head: one attention call.
struct HeadRun {
  int64_t head, n_heads, kv_head;
};

// Weights of one block, as the slice holds them (q heads, KV heads, FFN rows, experts).
// Vectors that a layer's options leave out are empty. Each member loads the tensor of the
// model's list (model/arch.h's model_tensors) that names its LayerWeight, in the comment
// beside it; layer_member() below is the same pairing for the loader.
struct Layer {
  LayerOptions options;
  Rope rope;
  // Attention of this layer's shapes: the slice's query heads grouped by the KV head they
  // read, the kernel for its head sizes, and its scale on q . k.
  std::vector<HeadRun> head_runs;
  kernels::AttendFn attend = nullptr;
  float attn_scale = 1.0f;
  std::vector<float> attn_norm, ffn_norm;            // kAttnNorm, kFfnNorm [n_embd]
  std::vector<float> post_attn_norm, post_ffn_norm;  // kPostAttnNorm, kPostFfnNorm [n_embd]
  // Grouped-query attention.
  PackedMatrix wq, wk, wv;  // kAttnQ/K/V: [q_dim x n_embd], [kv_dim x n_embd], [kv_dim_v x ..]
  std::vector<float> bq, bk, bv;      // kAttnQBias/KBias/VBias: [q_dim], [kv_dim], [kv_dim_v]
  std::vector<float> q_norm, k_norm;  // kAttnQNorm, kAttnKNorm: [head_dim]
  std::vector<float> sinks;           // kAttnSinks: [n_head]
  // Multi-head latent attention.
  PackedMatrix wq_a, wq_b;       // kAttnQA, kAttnQB: [q_lora x n_embd], [n_head * hd x q_lora]
  std::vector<float> q_a_norm;   // kAttnQANorm: [q_lora]
  PackedMatrix wkv_a;            // kAttnKvA: [kv_lora + n_rot x n_embd]
  std::vector<float> kv_a_norm;  // kAttnKvANorm: [kv_lora]
  // kAttnKB, kAttnVB (or both cut from kAttnKvB): per held head [kv_lora x nope], [hdv x
  // kv_lora].
  std::vector<PackedMatrix> k_b, v_b;
  // Both.
  PackedMatrix wo;        // kAttnOutput: [n_embd x n_head * hdv] (columns of the slice)
  std::vector<float> bo;  // kAttnOutputBias: [n_embd], added once after the all-reduce
  // FFN: dense (a dense layer), or the shared experts of an MoE layer.
  int64_t n_ff = 0;                         // rows of ffn_gate / ffn_up held
  bool ffn_runs = false;                    // this rank computes the dense / shared FFN
  PackedMatrix ffn_gate, ffn_up, ffn_down;  // kFfnGate, kFfnUp, kFfnDown
  // Mixture of experts.
  PackedMatrix router;                             // kRouter: [n_expert x n_embd], whole
  std::vector<float> router_bias, selection_bias;  // kRouterBias, kSelectionBias: [n_expert]
  std::vector<PackedMatrix> gate_exps, up_exps, down_exps;  // kGate/Up/DownExps: per held expert
  std::vector<float> gate_exps_b, up_exps_b;  // kGate/UpExpsBias: [held][n_ff_expert slice]
  std::vector<float> down_exps_b;             // kDownExpsBias: [held][n_embd] (ff_begin == 0)
  // Gemma 4's experts beside the dense FFN (kGateUpExps loads gate_exps and up_exps).
  std::vector<float> router_scale;     // kRouterScale [n_embd], divided by sqrt(n_embd)
  std::vector<float> down_exps_scale;  // kDownExpsScale [n_expert], by expert id
  std::vector<float> pre_ffn_norm_2, post_ffn_norm_1, post_ffn_norm_2;  // [n_embd]
  // Gemma 4's per-layer input and output scale.
  PackedMatrix per_layer_gate;             // kPerLayerGate [n_embd_per_layer x n_embd]
  PackedMatrix per_layer_proj;             // kPerLayerProj [n_embd x n_embd_per_layer]
  std::vector<float> per_layer_post_norm;  // kPerLayerPostNorm [n_embd]
  std::vector<float> out_scale;            // kLayerOutputScale [1]
};

// Where the loader puts a block tensor: exactly one of the three is set.
struct LayerMember {
  PackedMatrix Layer::*matrix = nullptr;
  std::vector<PackedMatrix> Layer::*matrices = nullptr;  // per held expert or head
  std::vector<float> Layer::*values = nullptr;           // 1-D, or per held expert
};
inline LayerMember layer_member(LayerWeight w) {
  using W = LayerWeight;
  switch (w) {
    case W::kNone:
      break;
    case W::kAttnNorm:
      return {.values = &Layer::attn_norm};
    case W::kFfnNorm:
      return {.values = &Layer::ffn_norm};
    case W::kPostAttnNorm:
      return {.values = &Layer::post_attn_norm};
    case W::kPostFfnNorm:
      return {.values = &Layer::post_ffn_norm};
    case W::kAttnQ:
      return {.matrix = &Layer::wq};
    case W::kAttnK:
      return {.matrix = &Layer::wk};
    case W::kAttnV:
      return {.matrix = &Layer::wv};
    case W::kAttnQBias:
      return {.values = &Layer::bq};
    case W::kAttnKBias:
      return {.values = &Layer::bk};
    case W::kAttnVBias:
      return {.values = &Layer::bv};
    case W::kAttnQNorm:
      return {.values = &Layer::q_norm};
    case W::kAttnKNorm:
      return {.values = &Layer::k_norm};
    case W::kAttnSinks:
      return {.values = &Layer::sinks};
    case W::kAttnQA:
      return {.matrix = &Layer::wq_a};
    case W::kAttnQANorm:
      return {.values = &Layer::q_a_norm};
    case W::kAttnQB:
      return {.matrix = &Layer::wq_b};
    case W::kAttnKvA:
      return {.matrix = &Layer::wkv_a};
    case W::kAttnKvANorm:
      return {.values = &Layer::kv_a_norm};
    case W::kAttnKvB:
      return {.matrices = &Layer::k_b};  // and v_b
    case W::kAttnKB:
      return {.matrices = &Layer::k_b};
    case W::kAttnVB:
      return {.matrices = &Layer::v_b};
    case W::kAttnOutput:
      return {.matrix = &Layer::wo};
    case W::kAttnOutputBias:
      return {.values = &Layer::bo};
    case W::kFfnGate:
      return {.matrix = &Layer::ffn_gate};
    case W::kFfnUp:
      return {.matrix = &Layer::ffn_up};
    case W::kFfnDown:
      return {.matrix = &Layer::ffn_down};
    case W::kRouter:
      return {.matrix = &Layer::router};
    case W::kRouterBias:
      return {.values = &Layer::router_bias};
    case W::kSelectionBias:
      return {.values = &Layer::selection_bias};
    case W::kGateExps:
      return {.matrices = &Layer::gate_exps};
    case W::kUpExps:
      return {.matrices = &Layer::up_exps};
    case W::kDownExps:
      return {.matrices = &Layer::down_exps};
    case W::kGateExpsBias:
      return {.values = &Layer::gate_exps_b};
    case W::kUpExpsBias:
      return {.values = &Layer::up_exps_b};
    case W::kDownExpsBias:
      return {.values = &Layer::down_exps_b};
    case W::kRouterScale:
      return {.values = &Layer::router_scale};
    case W::kGateUpExps:
      return {.matrices = &Layer::gate_exps};  // and up_exps
    case W::kDownExpsScale:
      return {.values = &Layer::down_exps_scale};
    case W::kPreFfnNorm2:
      return {.values = &Layer::pre_ffn_norm_2};
    case W::kPostFfnNorm1:
      return {.values = &Layer::post_ffn_norm_1};
    case W::kPostFfnNorm2:
      return {.values = &Layer::post_ffn_norm_2};
    case W::kPerLayerGate:
      return {.matrix = &Layer::per_layer_gate};
    case W::kPerLayerProj:
      return {.matrix = &Layer::per_layer_proj};
    case W::kPerLayerPostNorm:
      return {.values = &Layer::per_layer_post_norm};
    case W::kLayerOutputScale:
      return {.values = &Layer::out_scale};
  }
  return {};
}

// Floats of each scratch buffer for a batch of n tokens (Shard::State::scratch_sizes).
struct ScratchSizes {
  size_t x = 0, h = 0, q = 0, k = 0, v = 0, attn = 0, ffn_a = 0, ffn_b = 0, ffn_out = 0;
  size_t router_logits = 0, scores = 0, attn_chunks = 0, mla_q = 0, mla_o = 0, mla_in = 0,
         mla_out = 0;
  size_t moe_in = 0, moe_a = 0, moe_b = 0, moe_out = 0, moe_acc = 0;
  size_t moe_choices = 0;                 // [n][n_expert_used] ids and weights
  size_t per_layer = 0, per_layer_a = 0;  // per-layer inputs: [n][layers][P], [n][P]
  size_t router_in = 0;                   // Gemma 4's router input [n][n_embd]
  size_t bytes() const;                   // all of them, and the matmul workspace
};

struct Shard::State {
  const ArchSpec* arch = nullptr;
  HParams hp;
  ShardSpec spec;
  ShardOptions options;
  // The slice's sizes: the model's own for a whole shard. Weights, biases and the KV cache
  // hold only these; the forward pass sizes everything by them.
  int64_t n_head = 0, n_head_kv = 0;  // query heads, KV heads (spec.slice's ranges)
  int64_t n_ff = 0;                   // FFN rows of each held expert (or of the dense FFN)
  int64_t n_vocab = 0;                // output-head rows
  std::vector<int64_t> experts;       // MoE: ids of the held experts, parallel to gate_exps
  bool sliced = false;                // holds less than the whole model
  bool partial_sums = false;          // its layers' projections are partial: needs an all-reduce
  float attn_scale = 1.0f;

  const gguf::TensorInfo* token_embd = nullptr;
  std::vector<float> output_norm;
  PackedMatrix output;  // [n_vocab x n_embd]: rows [vocab_begin, vocab_end)
  // Weight bytes the shard made itself (column slices, transposed MLA blocks), kept while
  // a packed matrix views them.
  std::vector<std::vector<uint8_t>> owned_copies;
  std::vector<float> rope_freqs;  // empty when the model has none
  std::vector<Layer> layers;      // layers [spec.layer_begin, spec.layer_end)
  // Per-layer inputs (hp.n_embd_per_layer = P > 0): the token embedding, the per-layer
  // token embedding [n_layer P x n_vocab], the rows of per_layer_model_proj for this shard's
  // layers [layers P x n_embd], and per_layer_proj_norm [P].
  const gguf::TensorInfo* per_layer_embd = nullptr;
  PackedMatrix per_layer_model_proj;
  std::vector<float> per_layer_proj_norm;
  KvCache kv;
  kernels::Workspace workspace;
  kernels::SiluMulFn silu_mul = nullptr;
  std::unique_ptr<Router> router;  // MoE

  // Scratch for up to `capacity` tokens, allocated at load (reserve()) and grown only by a
  // batch larger than any before: nothing is allocated once warm.
  int64_t capacity = 0;
  std::vector<float> x, h, q, k, v, attn, ffn_a, ffn_b, ffn_out, router_logits;
  std::vector<float> scores;  // [n_threads][scores_per_thread()]: the attention kernel's
  // Attention calls cut into chunks of positions (attend_cached): [calls][chunks][heads]
  // [v_dim] outputs, then [chunks][heads][2] partial sums; fewer calls than threads.
  std::vector<float> attn_chunks;
  // MLA: queries in latent space [n][n_head][kv_lora + n_rot], attention outputs
  // [n][n_head][kv_lora], and the heads' inputs and outputs of k_b / v_b ([n_head][n][...]).
  std::vector<float> mla_q, mla_o, mla_in, mla_out;
  std::vector<float> moe_in, moe_a, moe_b, moe_out, moe_acc;
  std::vector<int32_t> moe_experts;  // [n][n_expert_used]
  std::vector<float> moe_weights;    // [n][n_expert_used]
  std::vector<int64_t> moe_rows;     // tokens routed to one expert
  std::vector<float> moe_row_weights;
  std::vector<float> per_layer, per_layer_a;  // [n][layers][P], [n][P]
  std::vector<float> router_in;               // [n][n_embd] (moe_beside_dense)

  // Resolves spec.slice's -1 ends, checks it against the model and sets the slice sizes.
  void resolve_slice();
  // Sizes every scratch buffer for n tokens (no-op when they are large enough).
  void reserve(int64_t n, int n_threads);
  ScratchSizes scratch_sizes(int64_t n, int n_threads) const;
  int64_t max_heads_per_call() const;  // of any layer
  int64_t scores_per_thread() const;   // attention kernel scratch, per thread
  // The layers' widest head sizes and dense FFN (Gemma 4's differ per layer).
  int64_t max_head_dim() const;
  int64_t max_ff() const;

  void attention(int64_t il, const Batch& batch, ThreadPool& pool);
  void gqa_attention(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool);
  void mla_attention(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool);
  // Attention of every token over its cached positions (in the slice's head runs).
  void attend_cached(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool,
                     const float* queries, int64_t q_stride, int64_t k_dim, int64_t v_dim,
                     float* out, int64_t out_stride);
  void ffn(const Layer& l, int64_t n, ThreadPool& pool);
  // The gated FFN gate/up -> act -> down of n rows of `in` into `out` ([n][n_embd]), with
  // optional per-row biases.
  void gated_ffn(const PackedMatrix& gate, const PackedMatrix& up, const PackedMatrix& down,
                 int64_t n_ff, const float* in, int64_t n, ThreadPool& pool, float* a, float* b,
                 float* out, const float* gate_bias, const float* up_bias);
  // The experts of an MoE layer: router over `router_in`, experts over `in` ([n][n_embd]),
  // into out [n][n_embd]; the shared experts too unless the layer runs its dense FFN beside.
  void moe_ffn(const Layer& l, int64_t n, ThreadPool& pool, const float* router_in, const float* in,
               float* out);
  // Gemma 4's MoE layer: the dense FFN and the experts side by side, each normed, summed
  // into ffn_out (x: the layer's residual stream [n][n_embd]; h holds RMSNorm(x) * ffn_norm).
  // Whole layers only (the norms of the two parts need their whole sums: such models refuse
  // tensor parallelism, resolve_slice).
  void moe_beside_dense_ffn(const Layer& l, const float* x, int64_t n, ThreadPool& pool);
  // Gemma 4's per-layer inputs of the shard's layers for the batch: per_layer [n][layers][P].
  void per_layer_inputs(const Batch& batch, const float* embedded, ThreadPool& pool);
  // x += RMSNorm(proj (gelu(gate x) * P[layer])) * post_norm for layer `layer` of the shard.
  void add_per_layer_input(const Layer& l, int64_t layer, float* x, int64_t n, ThreadPool& pool);
};

}  // namespace herd::engine
