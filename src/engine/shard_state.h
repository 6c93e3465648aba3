// The inside of a Shard: its weights per layer, KV cache and scratch, shared by the files of
// the forward pass (shard.cpp: loading and the layer loop; shard_attention.cpp;
// shard_ffn.cpp; shard_scratch.cpp: the scratch's sizes). Internal to the engine module.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/compressed_attention.h"
#include "engine/compressed_kv_cache.h"
#include "engine/delta_net.h"
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
  std::vector<float> bq, bk, bv;  // kAttnQBias/KBias/VBias: [q_dim], [kv_dim], [kv_dim_v]
  // kAttnQNorm, kAttnKNorm: [head_dim]; over the whole row: [q_dim], [kv_dim]
  std::vector<float> q_norm, k_norm;
  std::vector<float> sinks;  // kAttnSinks: [n_head]
  // Multi-head latent attention.
  PackedMatrix wq_a, wq_b;       // kAttnQA, kAttnQB: [q_lora x n_embd], [n_head * hd x q_lora]
  std::vector<float> q_a_norm;   // kAttnQANorm: [q_lora]
  PackedMatrix wkv_a;            // kAttnKvA: [kv_lora + n_rot x n_embd]
  std::vector<float> kv_a_norm;  // kAttnKvANorm: [kv_lora]
  // kAttnKB, kAttnVB (or both cut from kAttnKvB): per held head [kv_lora x nope], [hdv x
  // kv_lora].
  std::vector<PackedMatrix> k_b, v_b;
  // The same per-head matrices as stored, for decompressing the latent in prefill: W_k,h
  // as [nope x kv_lora] rows (attn_kv_b's), or transposed as [kv_lora x nope] (attn_k_b,
  // w_k_transposed); W_v,h as [hdv x kv_lora].
  std::vector<kernels::MatrixView> w_k, w_v;
  bool w_k_transposed = false;
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
  std::vector<float> shexp_gate;              // kSharedExpertGate: [n_embd]
  // Gated DeltaNet (options.linear; shard_linear.cpp).
  PackedMatrix delta_qkv, delta_z;       // kDeltaQkv, kDeltaZ: [conv_dim x n_embd], [n_v dv x ..]
  PackedMatrix delta_beta, delta_alpha;  // kDeltaBeta, kDeltaAlpha: [n_v x n_embd]
  PackedMatrix delta_ba;   // kDeltaBa: [2 n_v x n_embd], rows [b of the held V heads | a of them]
  PackedMatrix delta_out;  // kDeltaOut: [n_embd x n_v dv]
  std::vector<float> delta_conv;              // kDeltaConv: [kernel][held conv channels]
  std::vector<float> delta_dt_bias, delta_a;  // kDeltaDtBias, kDeltaA: [n_v]
  std::vector<float> delta_norm;              // kDeltaNorm: [dv]
  std::vector<int32_t> delta_k_head;          // [n_v]: the K head each V head reads
  std::vector<int32_t> hash_experts;          // kHashExperts: [n_vocab][n_expert_used]
  // Hyper-connections: the mixes of the residual streams around each sublayer.
  PackedMatrix hc_attn_fn, hc_ffn_fn;              // kHcAttnFn, kHcFfnFn: [n_mixes x n_hc n_embd]
  std::vector<float> hc_attn_scale, hc_ffn_scale;  // kHcAttnScale, kHcFfnScale: [3]
  std::vector<float> hc_attn_base, hc_ffn_base;    // kHcAttnBase, kHcFfnBase: [n_mixes]
  // Compressed attention (DeepSeek V4; with wq_a, q_a_norm, wq_b, kv_a_norm and sinks above).
  PackedMatrix wkv;                         // kAttnKv: [head_dim x n_embd], the latent (K = V)
  std::vector<PackedMatrix> wo_a;           // kAttnOutputA: per output group [o_lora x group]
  PackedMatrix wo_b;                        // kAttnOutputB: [n_embd x n_group o_lora]
  PackedMatrix comp_kv, comp_gate;          // kCompKv, kCompGate: [width x n_embd]
  std::vector<float> comp_ape, comp_norm;   // kCompApe: [ratio][width]; kCompNorm: [head_dim]
  PackedMatrix idx_q_b, idx_proj;           // kIndexerQB, kIndexerProj
  PackedMatrix idx_comp_kv, idx_comp_gate;  // kIndexerCompKv, kIndexerCompGate: [2 di x n_embd]
  std::vector<float> idx_comp_ape, idx_comp_norm;  // kIndexerCompApe, kIndexerCompNorm
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

// The Gated DeltaNet tensors, which Shard::State::load_linear cuts by head itself.
inline bool is_delta_weight(LayerWeight w) {
  using W = LayerWeight;
  return w == W::kDeltaQkv || w == W::kDeltaZ || w == W::kDeltaBeta || w == W::kDeltaAlpha ||
         w == W::kDeltaBa || w == W::kDeltaConv || w == W::kDeltaDtBias || w == W::kDeltaA ||
         w == W::kDeltaNorm || w == W::kDeltaOut;
}

// Where the loader puts a block tensor: exactly one of the four is set.
struct LayerMember {
  PackedMatrix Layer::*matrix = nullptr;
  std::vector<PackedMatrix> Layer::*matrices = nullptr;  // per held expert or head
  std::vector<float> Layer::*values = nullptr;           // 1-D, or per held expert
  std::vector<int32_t> Layer::*ids = nullptr;            // int32 as stored
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
    case W::kSharedExpertGate:
      return {.values = &Layer::shexp_gate};
    case W::kDeltaQkv:
      return {.matrix = &Layer::delta_qkv};
    case W::kDeltaZ:
      return {.matrix = &Layer::delta_z};
    case W::kDeltaBeta:
      return {.matrix = &Layer::delta_beta};
    case W::kDeltaAlpha:
      return {.matrix = &Layer::delta_alpha};
    case W::kDeltaBa:
      return {.matrix = &Layer::delta_ba};
    case W::kDeltaConv:
      return {.values = &Layer::delta_conv};
    case W::kDeltaDtBias:
      return {.values = &Layer::delta_dt_bias};
    case W::kDeltaA:
      return {.values = &Layer::delta_a};
    case W::kDeltaNorm:
      return {.values = &Layer::delta_norm};
    case W::kDeltaOut:
      return {.matrix = &Layer::delta_out};
    case W::kHcAttnFn:
      return {.matrix = &Layer::hc_attn_fn};
    case W::kHcAttnScale:
      return {.values = &Layer::hc_attn_scale};
    case W::kHcAttnBase:
      return {.values = &Layer::hc_attn_base};
    case W::kHcFfnFn:
      return {.matrix = &Layer::hc_ffn_fn};
    case W::kHcFfnScale:
      return {.values = &Layer::hc_ffn_scale};
    case W::kHcFfnBase:
      return {.values = &Layer::hc_ffn_base};
    case W::kAttnKv:
      return {.matrix = &Layer::wkv};
    case W::kAttnOutputA:
      return {.matrices = &Layer::wo_a};
    case W::kAttnOutputB:
      return {.matrix = &Layer::wo_b};
    case W::kCompKv:
      return {.matrix = &Layer::comp_kv};
    case W::kCompGate:
      return {.matrix = &Layer::comp_gate};
    case W::kCompApe:
      return {.values = &Layer::comp_ape};
    case W::kCompNorm:
      return {.values = &Layer::comp_norm};
    case W::kIndexerQB:
      return {.matrix = &Layer::idx_q_b};
    case W::kIndexerProj:
      return {.matrix = &Layer::idx_proj};
    case W::kIndexerCompKv:
      return {.matrix = &Layer::idx_comp_kv};
    case W::kIndexerCompGate:
      return {.matrix = &Layer::idx_comp_gate};
    case W::kIndexerCompApe:
      return {.values = &Layer::idx_comp_ape};
    case W::kIndexerCompNorm:
      return {.values = &Layer::idx_comp_norm};
    case W::kHashExperts:
      return {.ids = &Layer::hash_experts};
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
  size_t moe_choices = 0;  // [n][n_expert_used] ids and weights
  size_t qk_sums = 0;      // [n][2]: a whole-row q/k norm's sums of squares
  size_t attn_gate = 0;    // gated attention: [n][n_head * head_dim]
  // Gated DeltaNet: projections [n][conv_dim], [n][value_dim], [n][2 n_v] (beta and alpha),
  // output [n][value_dim]; and delta_net_mix's own (DeltaNetScratch::bytes_for).
  size_t delta_qkv = 0, delta_z = 0, delta_ba = 0, delta_out = 0;
  size_t delta_mix_bytes = 0;
  size_t hc_flat = 0, hc_mixes = 0, hc_coeffs = 0;
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
  KvCache kv;  // compressed attention: no layers (its state is in ckv)
  CompressedKvCache ckv;
  CompressedAttentionScratch compressed;
  // Hyper-connections at the output: output_hc_fn [n_hc x n_hc n_embd], scale [1], base [n_hc].
  PackedMatrix output_hc_fn;
  std::vector<float> output_hc_scale, output_hc_base;
  kernels::Workspace workspace;
  kernels::SiluMulFn silu_mul = nullptr;
  std::unique_ptr<Router> router;  // MoE
  // The device the forward pass runs on; null: the CPU (this file's code).
  std::unique_ptr<DeviceBackend> device;

  // Scratch for up to `capacity` tokens, allocated at load (reserve()) and grown only by a
  // batch larger than any before: nothing is allocated once warm.
  int64_t capacity = 0;
  std::vector<float> x, h, q, k, v, attn, ffn_a, ffn_b, ffn_out, router_logits;
  int64_t n_forwarded = 0;    // rows of x the last forward() left there (Shard::last_hidden)
  std::vector<float> scores;  // [n_threads][scores_per_thread()]: the attention kernel's
  // Attention calls cut into chunks of positions (attend_cached): [calls][chunks][heads]
  // [v_dim] outputs, then [chunks][heads][2] partial sums; fewer calls than threads.
  std::vector<float> attn_chunks;
  // MLA: queries in latent space [n][n_head][kv_lora + n_rot], attention outputs
  // [n][n_head][kv_lora], and the heads' inputs and outputs of k_b / v_b ([n_head][n][...]).
  std::vector<float> mla_q, mla_o, mla_in, mla_out;
  // Decompressed MLA (mla_decompressed): the latent and rope keys of the visible positions
  // [L][kv_lora], [L][n_rot]; one head's keys [L][nope] and [L][head_dim], values
  // transposed [hdv][L], queries [n][head_dim], scores [n][L], output [n][hdv], W_k,h
  // [nope][kv_lora] (and its stored transpose), W_v,h [hdv][kv_lora]. Grown by the first
  // long prefill.
  std::vector<float> dmla_c, dmla_rope, dmla_knope, dmla_k, dmla_vt, dmla_q, dmla_s, dmla_o,
      dmla_wk, dmla_wv;
  std::vector<float> moe_in, moe_a, moe_b, moe_out, moe_acc;
  std::vector<float> qk_sums;        // [n][2]: q's and k's sums of squares over the whole row
  std::vector<int32_t> moe_experts;  // [n][n_expert_used]
  std::vector<float> moe_weights;    // [n][n_expert_used]
  std::vector<int64_t> moe_rows;     // tokens routed to one expert
  std::vector<float> moe_row_weights;
  std::vector<float> attn_gate;  // [n][n_head * head_dim]
  // Gated DeltaNet: [n][conv_dim], [n][value_dim], [n][2 n_v] (beta, then alpha: [n][n_v]
  // each), [n][value_dim].
  std::vector<float> delta_qkv_buf, delta_z_buf, delta_ba_buf, delta_out_buf;
  DeltaNetScratch delta_scratch;
  DeltaNetDims delta_dims;  // the layers' sizes (the whole model's)
  // Hyper-connections: the normed streams [n][n_hc n_embd], each token's mixes [n][n_mixes]
  // and its pre, post and combination weights [n][n_mixes] (pre, post, comb in that order).
  std::vector<float> hc_flat, hc_mixes, hc_coeffs;
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

  // all_reduce: the stage's, for a norm over the whole q / k row (null: a whole shard).
  void attention(int64_t il, const Batch& batch, ThreadPool& pool, AllReduce* all_reduce);
  void gqa_attention(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool,
                     AllReduce* all_reduce);
  // The q / k norm is over the whole row (ArchSpec::qk_norm_whole_row): every rank adds
  // its heads' sums of squares to the others' first.
  bool qk_row_sums() const;
  // sums[0], sums[1]: the squares of one token's held q heads [n_head * head_dim] and of the
  // KV heads in k [n_head_kv * head_dim] that this rank counts for the stage.
  void sum_qk_squares(const float* q, const float* k, float* sums) const;
  void mla_attention(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool);
  // MLA for a batch of one sequence's consecutive tokens with each head's keys and values
  // decompressed from the cached latent (shard_mla_prefill.cpp), into attn. Returns false,
  // doing nothing, when the batch is not such a run or the absorbed form is cheaper.
  bool mla_decompressed(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool);
  bool mla_decompress_pays(const Batch& batch) const;
  // Attention of every token over its cached positions (in the slice's head runs).
  void attend_cached(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool,
                     const float* queries, int64_t q_stride, int64_t k_dim, int64_t v_dim,
                     float* out, int64_t out_stride);
  void ffn(const Layer& l, int64_t n, ThreadPool& pool, const Batch& batch);
  // The gated FFN gate/up -> act -> down of n rows of `in` into `out` ([n][n_embd]), with
  // optional per-row biases; limit > 0 clamps SwiGLU (ops.h silu_clamp_mul).
  void gated_ffn(const PackedMatrix& gate, const PackedMatrix& up, const PackedMatrix& down,
                 int64_t n_ff, const float* in, int64_t n, ThreadPool& pool, float* a, float* b,
                 float* out, const float* gate_bias, const float* up_bias, float limit);
  // The experts of an MoE layer: router over `router_in`, experts over `in` ([n][n_embd]),
  // into out [n][n_embd]; the shared experts too unless the layer runs its dense FFN beside.
  void moe_ffn(const Layer& l, int64_t n, ThreadPool& pool, const Batch& batch,
               const float* router_in, const float* in, float* out);
  // Gemma 4's MoE layer: the dense FFN and the experts side by side, each normed, summed
  // into ffn_out (x: the layer's residual stream [n][n_embd]; h holds RMSNorm(x) * ffn_norm).
  // Whole layers only (the norms of the two parts need their whole sums: such models refuse
  // tensor parallelism, resolve_slice).
  void moe_beside_dense_ffn(const Layer& l, const float* x, int64_t n, ThreadPool& pool,
                            const Batch& batch);
  // Gemma 4's per-layer inputs of the shard's layers for the batch: per_layer [n][layers][P].
  void per_layer_inputs(const Batch& batch, const float* embedded, ThreadPool& pool);
  // x += RMSNorm(proj (gelu(gate x) * P[layer])) * post_norm for layer `layer` of the shard.
  void add_per_layer_input(const Layer& l, int64_t layer, float* x, int64_t n, ThreadPool& pool);
  // Compressed attention of a layer (compressed_attention.h) from h into out [n][n_embd].
  void compressed_attention_layer(const Layer& l, int64_t layer, const Batch& batch,
                                  ThreadPool& pool, float* out);
  CompressedAttentionOptions compressed_options(const Layer& l) const;
  // The compressed cache's side of a batch: each slot continues where it stands or starts
  // again at 0 (checked before anything changes), and its length after the batch.
  void compressed_begin(const Batch& batch);
  void compressed_end(const Batch& batch);
  RecurrentSnapshot compressed_snapshot(int32_t seq) const;
  void compressed_restore(int32_t seq, const RecurrentSnapshot& snapshot);
  // Hyper-connections: h <- norm(sum_i pre_i X_i) (the sublayer's input, norm weight `norm`),
  // keeping post and comb for hc_post; hc_post spreads the sublayer's output back.
  void hc_pre(const PackedMatrix& fn, const std::vector<float>& scale,
              const std::vector<float>& base, const std::vector<float>& norm, int64_t n,
              ThreadPool& pool);
  void hc_post(const float* out, int64_t n, ThreadPool& pool);
  // The output head's reduction of the streams, in place: x [n][n_hc n_embd] -> [n][n_embd]
  // (rows of the tokens that want logits only are used after it).
  void hc_head(const Batch& batch, ThreadPool& pool);
  // A Gated DeltaNet layer from h into ffn_out's place `out` ([n][n_embd], before the
  // all-reduce).
  void linear_attention(const Layer& l, int64_t layer, const Batch& batch, ThreadPool& pool,
                        float* out);
  // DeltaNet layers of a tensor-parallel slice (shard_linear.cpp): V heads in proportion to
  // the query heads (n_v / n_head per head; when that is not whole, the rank of the first
  // heads holds them all), and the K heads they read (grouped: their own; tiled: all).
  int64_t delta_v_begin = 0, delta_k_begin = 0;  // first held V / K head of the model
  void resolve_delta_slice();
  // Loads layer il's DeltaNet tensors, cut to the held heads: attn_qkv's rows and
  // ssm_conv1d's channels of the held q, k and v; attn_gate, ssm_beta / ssm_alpha / ssm_ba
  // rows, ssm_dt and ssm_a of the held V heads; ssm_out's columns of them. The conv weight
  // is stored transposed for the kernel.
  void load_linear(const gguf::File& file, Layer& l, int64_t il);
  // The cache's shape for this shard: per layer a recurrent state (linear layers) or its
  // KV rows (its slice's KV heads; none for a layer that reads another layer's).
  CacheLayout cache_layout(int64_t n_ctx) const;
};

// The compressed cache a shard of these layers holds (compressed_kv_cache.h).
CompressedCacheShape compressed_cache_shape(const ArchSpec& arch, const HParams& hp,
                                            const ShardSpec& spec, int64_t n_seq, int64_t n_ctx);
// Bytes of the compressed attention's scratch (reserved for every layer of the shard).
size_t compressed_scratch_bytes(const Shard::State& s, int64_t n_ctx, int64_t n_batch,
                                int n_threads);

}  // namespace herd::engine
