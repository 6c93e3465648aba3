// Gated DeltaNet (Qwen3-Next, Qwen3.5 / 3.6 linear attention): the short causal convolution
// over the q, k, v channels and the gated delta rule, the recurrence that replaces attention's
// cache of positions with one [dk][dv] state per V head:
//
//   S <- exp(g) S;  S <- S + beta (v - S k) k^T;  o = S (scale q)
//
// (S as the map k -> v; stored transposed, one row of dv values per key dimension, as the
// reference stores it). delta_rule_recurrent runs it token by token; delta_rule_chunked in
// chunks (the products with the state at a chunk's start done for all its tokens at once,
// the tokens inside a chunk interacting through a small triangular system), 1.8x the
// recurrence's speed on long runs of 128-wide heads (delta_net_bench) but with other
// rounding, which depends on where runs start: the engine uses the recurrence, whose
// result does not depend on how tokens are batched (engine/delta_net.cpp says why). Both
// give the recurrence's result within float rounding (delta_net_test.cpp). One kernel per
// ISA, chosen once (delta_rule_kernel); the scalar recurrence is the reference.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace herd::kernels {

// ---- convolution ---------------------------------------------------------------------------

// A causal depthwise convolution of `kernel` taps over `channels` channels, then SiLU:
//   out_t[c] = silu(sum_j w[j][c] x_{t - kernel + 1 + j}[c]),
// where inputs before the run come from the state (the last kernel - 1 inputs of the
// sequence; zeros for a new one). The state is updated to the run's last kernel - 1 inputs.
// A call may cover a range of the channels (pointers offset by its first channel): threads
// split the channels.
struct ConvArgs {
  int64_t n_tokens = 0;
  int64_t channels = 0;
  int64_t kernel = 0;        // REQUIRES: >= 1
  const float* x = nullptr;  // token t at x + t * x_stride: [channels]
  int64_t x_stride = 0;
  // [kernel][weight_stride]: tap j of channel c at weight[j * weight_stride + c]; tap
  // kernel - 1 multiplies the current token (ssm_conv1d transposed).
  const float* weight = nullptr;
  int64_t weight_stride = 0;
  float* state = nullptr;  // [kernel - 1][state_stride]: oldest input first
  int64_t state_stride = 0;
  float* out = nullptr;  // token t at out + t * out_stride: [channels]
  int64_t out_stride = 0;
};
void conv1d_silu(const ConvArgs& args);

// x /= max(|x|_2, eps): [n] in place (the reference's l2_norm of q and k per head).
void l2_normalize(float* x, int64_t n, float eps);

// ---- the gated delta rule ------------------------------------------------------------------

// One V head's run of consecutive tokens of one sequence.
struct DeltaRuleArgs {
  int64_t n_tokens = 0;
  int64_t dk = 0, dv = 0;  // key (= query) and value sizes of the head
  // Token t: q + t * q_stride, k + t * k_stride: [dk], L2-normalized; v + t * v_stride: [dv].
  const float* q = nullptr;
  int64_t q_stride = 0;
  const float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  // Token t: beta[t * gate_stride] (the write strength, sigmoid already applied) and
  // g[t * gate_stride] (the log of the decay, <= 0).
  const float* beta = nullptr;
  const float* g = nullptr;
  int64_t gate_stride = 0;
  float scale = 1.0f;      // on q
  float* state = nullptr;  // [dk][dv], row-major: read and updated
  float* out = nullptr;    // token t at out + t * out_stride: [dv]
  int64_t out_stride = 0;
  float* scratch = nullptr;  // delta_rule_scratch_floats(dk, dv) floats
};
// REQUIRES: n_tokens >= 1; dk, dv <= kMaxDeltaHead.
using DeltaRuleFn = void (*)(const DeltaRuleArgs& args);

inline constexpr int64_t kMaxDeltaHead = 256;
// Tokens per chunk of the chunked form: the triangular system and the scratch grow with its
// square, the passes over the state shrink with it. On x86 (delta_net_bench, AVX-512, one
// head of 128) 16 and 8 run 1.8x the recurrence's tokens/s from a run of 64 tokens on, 32
// about the same, 64 slower than the recurrence; with heads of 64, 16 is on a par with it.
inline constexpr int64_t kDeltaChunk = 16;

// Scratch floats any kernel below needs for one call (one head at a time: a thread reuses it).
int64_t delta_rule_scratch_floats(int64_t dk, int64_t dv);

// The best kernel of `isa` (or below it) for value heads of dv: the recurrence (decode, runs
// shorter than a chunk) or the chunked form.
DeltaRuleFn delta_rule_kernel(Isa isa, int64_t dv, bool chunked);

namespace scalar {
// The reference: the recurrence, token by token, in plain loops.
void delta_rule_recurrent(const DeltaRuleArgs& args);
// The chunked form over width-1 vectors (delta_net_simd.h).
void delta_rule_chunked(const DeltaRuleArgs& args);
}  // namespace scalar
// Each SIMD ISA's instantiation of delta_net_simd.h (delta_net_<isa>.cpp). REQUIRES dv a
// multiple of the width (avx2 8, avx512 16, neon 4); delta_rule_kernel checks it.
namespace avx2 {
extern const DeltaRuleFn delta_rule_recurrent;
extern const DeltaRuleFn delta_rule_chunked;
}  // namespace avx2
namespace avx512 {
extern const DeltaRuleFn delta_rule_recurrent;
extern const DeltaRuleFn delta_rule_chunked;
}  // namespace avx512
namespace neon {
extern const DeltaRuleFn delta_rule_recurrent;
extern const DeltaRuleFn delta_rule_chunked;
}  // namespace neon

}  // namespace herd::kernels
