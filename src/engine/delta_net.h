// The mixing step of a Gated DeltaNet layer (Qwen3-Next, Qwen3.5 / 3.6): from the layer's
// input projections to what its output projection (ssm_out) reads, with the per-sequence
// state in the cache (kv_cache.h). For each run of consecutive tokens of one sequence:
//
//   qkv -> causal conv (ssm_conv1d, state: the last conv_kernel - 1 inputs) -> SiLU
//       -> q, k per K head (L2-normalized), v per V head
//   beta = sigmoid(b), g = softplus(alpha + ssm_dt.bias) * ssm_a       (per V head)
//   o = gated delta rule of V head j with K head k_head[j] (kernels/delta_net.h, the
//       recurrence: results independent of how tokens are grouped into batches)
//   out = RMSNorm(o) * ssm_norm * silu(z)                              (per V head)
//
// Threads split the conv over channels and the delta rule over (run, V head). A
// tensor-parallel rank holds some K heads and the V heads that read them: k_head indexes its
// own K heads, and its channels are [its q | its k | its v].
#pragma once

#include <cstdint>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_cache.h"
#include "kernels/delta_net.h"
#include "util/thread_pool.h"

namespace herd::engine {

// The sizes a layer (or a rank's slice of it) holds.
struct DeltaNetDims {
  int64_t n_k_heads = 0, n_v_heads = 0;
  int64_t dk = 0, dv = 0;
  int64_t conv_kernel = 0;
  float rms_eps = 1e-6f;  // of ssm_norm; the L2 norm of q and k uses it too, as the reference
  int64_t conv_dim() const { return 2 * n_k_heads * dk + n_v_heads * dv; }
  int64_t value_dim() const { return n_v_heads * dv; }
  RecurrentShape state_shape() const { return {conv_kernel - 1, conv_dim(), n_v_heads, dk, dv}; }
};

// The layer's small weights, as floats.
struct DeltaNetWeights {
  const float* conv = nullptr;      // [conv_kernel][conv_dim]: ssm_conv1d transposed
  const float* dt_bias = nullptr;   // [n_v_heads] ssm_dt.bias
  const float* a = nullptr;         // [n_v_heads] ssm_a (negative: -exp(A_log))
  const float* norm = nullptr;      // [dv] ssm_norm
  const int32_t* k_head = nullptr;  // [n_v_heads]: the K head each V head reads
};

// The per-layer work buffers, sized once for a batch size and thread count (reserve) so that
// nothing is allocated per token.
struct DeltaNetScratch {
  struct Run {
    int32_t seq = 0;
    int64_t begin = 0, end = 0;  // tokens [begin, end) of the batch
  };
  std::vector<float> conv_out;  // [n][conv_dim]
  std::vector<float> rule;      // [n_threads][delta_rule_scratch_floats]
  std::vector<Run> runs;        // at most n
  void reserve(const DeltaNetDims& dims, int64_t n, int n_threads);
  static size_t bytes_for(const DeltaNetDims& dims, int64_t n, int n_threads);
};

struct DeltaNetIo {
  const float* qkv = nullptr;  // [n][conv_dim] attn_qkv * h
  const float* z = nullptr;    // [n][value_dim] attn_gate * h
  float* b = nullptr;          // [n][n_v_heads] ssm_beta * h: overwritten with beta
  float* alpha = nullptr;      // [n][n_v_heads] ssm_alpha * h: overwritten with g
  float* out = nullptr;        // [n][value_dim]
};

// Runs the batch's tokens through layer `layer` of the cache (a kRecurrent layer), whose
// slots begin_recurrent has checked and reset. REQUIRES: the scratch reserved for at least
// batch.size() tokens and pool.size() threads.
void delta_net_mix(const DeltaNetDims& dims, const DeltaNetWeights& w, const Batch& batch,
                   int64_t layer, KvCache& cache, const DeltaNetIo& io, kernels::Isa isa,
                   DeltaNetScratch& scratch, ThreadPool& pool);

}  // namespace herd::engine
