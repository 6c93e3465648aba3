// DeepSeek V4's attention sublayer (one latent KV head, sliding window plus compressed
// entries), from the normed input of a batch to its output projection:
//
//   qr = RMSNorm(attn_q_a . u) attn_q_a_norm            [q_lora]
//   q  = attn_q_b . qr, per head RMSNorm (no weight), rope of the last n_rot   [n_head][d]
//   kv = RMSNorm(attn_kv . u) attn_kv_a_norm, rope of the last n_rot           [d], K = V
//   keys of a token at p: the raw kv of positions p - window + 1 .. p, and on a compressed
//     layer the entries of the blocks complete by p: all of them (HCA), or the top_k the
//     lightning indexer scores best (CSA; all when there are at most top_k)
//   o  = softmax with a per-head sink logit over those keys, scale 1/sqrt(d)  [n_head][d]
//   o  <- inverse rope of the last n_rot of each head
//   out = attn_output_b . concat_g (attn_output_a[g] . o[group g])           [n_embd]
//
// Keys, values and queries are rounded to F16 before the products, as the reference's
// flash attention over its F16 caches. The per-sequence state lives in a CompressedKvCache;
// the sublayer updates it with the batch (compressor rows and entries first, the raw window
// after attention: a batch's own rows are read from scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/batch.h"
#include "engine/compressed_kv_cache.h"
#include "engine/ops.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace herd::engine {

struct CompressedAttentionOptions {
  int64_t n_embd = 0, n_head = 0, head_dim = 0, q_lora = 0;
  int64_t window = 0;  // raw positions a query sees, its own included
  int64_t ratio = 0;   // 0: sliding-window attention only
  bool indexed = false;
  int64_t top_k = 0, indexer_heads = 0, indexer_dim = 0;
  int64_t n_group = 1, o_lora = 0;  // output groups, attn_output_a rows per group
  float eps = 1e-6f;
  Rope rope;             // of q, kv and the output (the layer's)
  Rope compressed_rope;  // of compressed entries and indexer queries
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
};

// The layer's weights (views; nothing is owned). Compressor and indexer ones may be null on
// layers without them.
struct CompressedAttentionWeights {
  const kernels::PackedMatrix *wq_a = nullptr, *wq_b = nullptr, *wkv = nullptr, *wo_b = nullptr;
  const std::vector<kernels::PackedMatrix>* wo_a = nullptr;  // [n_group] of [o_lora x group]
  const float *q_a_norm = nullptr, *kv_norm = nullptr, *sinks = nullptr;
  const kernels::PackedMatrix *comp_kv = nullptr, *comp_gate = nullptr;
  const float *comp_ape = nullptr, *comp_norm = nullptr;  // [ratio][width], [head_dim]
  const kernels::PackedMatrix *idx_q_b = nullptr, *idx_proj = nullptr, *idx_comp_kv = nullptr,
                              *idx_comp_gate = nullptr;
  const float *idx_comp_ape = nullptr, *idx_comp_norm = nullptr;
};

// Buffers of the sublayer, grown by reserve() to what a layer needs for a batch and a thread
// count (one scratch serves every layer), so a warm forward allocates nothing.
struct CompressedAttentionScratch {
  std::vector<float> qr, q, kv, comp_kv, comp_score, idx_q, idx_w, attn, group_in, group_out, oa,
      scores;
  std::vector<uint16_t> kv16, keys;  // [n][d]; [n_threads][window + max_entries][d]
  std::vector<int32_t> chosen;       // [n][top_k]
  std::vector<int64_t> n_chosen;     // [n]
  std::vector<int64_t> previous;     // [n]: the batch row of the same sequence at pos - 1
  std::vector<float> idx_scores;     // [n_threads][n_entries]
  int64_t capacity = 0, threads = 0;
  void reserve(const CompressedAttentionOptions& o, int64_t n_entries, int64_t n, int n_threads);
  size_t bytes() const;
};

// Runs the sublayer for the batch: u [n][n_embd] normed input -> out [n][n_embd].
// REQUIRES: scratch reserved for (o, cache's entries of `layer`, n, pool.size()); tokens of a
// sequence in the batch at increasing positions.
void compressed_attention(const CompressedAttentionOptions& o, const CompressedAttentionWeights& w,
                          const Batch& batch, const float* u, CompressedKvCache& cache,
                          int64_t layer, CompressedAttentionScratch& s, kernels::AttendFn attend,
                          ThreadPool& pool, kernels::Workspace& workspace, float* out);

}  // namespace herd::engine
