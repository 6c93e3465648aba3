// Attention of query heads that share one KV head over its cached keys and values (F16),
// the inner loop of the forward pass's attention (and the FFN's SiLU product, which shares its
// vector exp): out = sum_j softmax_j(q . k_j * scale) v_j. One kernel per ISA, chosen once
// (attend_kernel); the scalar one is the reference the others are tested against.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace herd::kernels {

// One call: n_q query heads that share a KV head (grouped-query attention: the SIMD kernels
// widen each cached row once for several of them; MLA: every head shares the one latent).
struct AttendArgs {
  const float* q = nullptr;  // [n_q][k_dim]
  int64_t n_q = 1;
  // n_pos rows of F16 values, row j at keys + j * stride / values + j * stride (stride in
  // elements); keys have k_dim values, values v_dim (MLA: the values are the first v_dim
  // of the key row, values == keys).
  const uint16_t* keys = nullptr;
  const uint16_t* values = nullptr;
  int64_t stride = 0;
  int64_t n_pos = 0;
  int64_t k_dim = 0, v_dim = 0;
  float scale = 1.0f;  // on q . k
  // [n_q] or null: per head an extra logit in the softmax with no value (attention sinks,
  // gpt-oss), not scaled; its share of the weight is dropped.
  const float* sinks = nullptr;
  float* scores = nullptr;  // scratch of attend_scratch_floats(n_q, n_pos, k_dim, v_dim)
  float* out = nullptr;     // [n_q][v_dim]
  // [n_q][2] or null. When set, the call covers a chunk of the positions: out is left
  // unnormalized (sum_j e^(s_j - max) v_j) and each head's (max, sum of e^(s_j - max)) is
  // written here, sinks not counted; merge_attention combines the chunks. Only the kernels
  // for which attend_takes_partial holds take it.
  float* partial = nullptr;
};
// REQUIRES: n_q >= 1, n_pos >= 1.
using AttendFn = void (*)(const AttendArgs& args);

// attend_lanes widens its rows of keys to f32 this many values at a time (a buffer that
// stays in L1).
inline constexpr int64_t kLaneDims = 64;

// Floats of AttendArgs::scores any kernel of attend_kernel needs for such a call.
int64_t attend_scratch_floats(int64_t n_q, int64_t n_pos, int64_t k_dim, int64_t v_dim);

// out[h] = the attention of n_chunks chunks of positions, each computed with partial set
// (partials: [n_chunks][n_q][2], outs: [n_chunks][n_q][v_dim]), with each head's sink (when
// sinks is not null) counted once.
void merge_attention(const float* partials, const float* outs, int64_t n_chunks, int64_t n_q,
                     int64_t v_dim, const float* sinks, float* out);

// The best attention kernel of `isa` (or below it) for keys of k_dim and values of v_dim.
// When k_dim != v_dim or either is over 256 (multi-head latent attention: the values are the
// first v_dim of each key row, values == keys), it takes AttendArgs::partial.
AttendFn attend_kernel(Isa isa, int64_t k_dim, int64_t v_dim);
bool attend_takes_partial(int64_t k_dim, int64_t v_dim);

// x[i] = silu(x[i]) * up[i] = x[i] / (1 + e^-x[i]) * up[i] for i < n: the gated product
// of the FFN, chosen once per ISA like attention (the SIMD ones use the vector exp of
// attention_simd.h, relative error < 1e-6 against the scalar one).
using SiluMulFn = void (*)(float* x, const float* up, int64_t n);
SiluMulFn silu_mul_kernel(Isa isa);

namespace scalar {
void silu_mul(float* x, const float* up, int64_t n);
void attend(const AttendArgs& args);
}  // namespace scalar
// Each SIMD ISA's kernels: the shared ones of attention_simd.h instantiated over its vectors
// (attention_<isa>.cpp). attend REQUIRES head_dim % width == 0 (avx2 8, avx512 16, neon 4)
// and head_dim <= 256; attend_kernel checks both.
// attend_wide takes any k_dim and v_dim that are multiples of the width (MLA's 576 / 512);
// attend_lanes (x86) too, when values == keys, with the heads across the vector's lanes.
namespace avx2 {
extern const SiluMulFn silu_mul;
extern const AttendFn attend;
extern const AttendFn attend_wide;
extern const AttendFn attend_lanes;
}  // namespace avx2
namespace avx512 {
extern const SiluMulFn silu_mul;
extern const AttendFn attend;
extern const AttendFn attend_wide;
extern const AttendFn attend_lanes;
}  // namespace avx512
namespace neon {
extern const SiluMulFn silu_mul;
extern const AttendFn attend;
extern const AttendFn attend_wide;
}  // namespace neon

}  // namespace herd::kernels
