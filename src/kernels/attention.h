// Attention of query heads that share one KV head over its cached keys and values (F16),
// the inner loop of the forward pass's attention (and the FFN's SiLU product, which shares its
// vector exp): out = sum_j softmax_j(q . k_j * scale) v_j. One kernel per ISA, chosen once
// (attend_kernel); the scalar one is the reference the others are tested against.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace herd::kernels {

// q: [n_q][head_dim] floats, n_q query heads that share the KV head (grouped-query
// attention: the SIMD kernels widen each cached row once for several of them); keys,
// values: n_pos rows of head_dim F16 values, row j at keys + j * stride (stride in
// elements); scores: scratch of n_q * n_pos floats; out: [n_q][head_dim].
// REQUIRES: n_q >= 1, n_pos >= 1.
using AttendFn = void (*)(const float* q, int64_t n_q, const uint16_t* keys, const uint16_t* values,
                          int64_t stride, int64_t n_pos, int64_t head_dim, float scale,
                          float* scores, float* out);

// The best attention kernel of `isa` (or below it) for heads of head_dim values.
AttendFn attend_kernel(Isa isa, int64_t head_dim);

// x[i] = silu(x[i]) * up[i] = x[i] / (1 + e^-x[i]) * up[i] for i < n: the gated product
// of the FFN, chosen once per ISA like attention (the SIMD ones use the vector exp of
// attention_simd.h, relative error < 1e-6 against the scalar one).
using SiluMulFn = void (*)(float* x, const float* up, int64_t n);
SiluMulFn silu_mul_kernel(Isa isa);

namespace scalar {
void silu_mul(float* x, const float* up, int64_t n);
void attend(const float* q, int64_t n_q, const uint16_t* keys, const uint16_t* values,
            int64_t stride, int64_t n_pos, int64_t head_dim, float scale, float* scores,
            float* out);
}  // namespace scalar
// Each SIMD ISA's kernels: the shared ones of attention_simd.h instantiated over its vectors
// (attention_<isa>.cpp). attend REQUIRES head_dim % width == 0 (avx2 8, avx512 16, neon 4)
// and head_dim <= 256; attend_kernel checks both.
namespace avx2 {
extern const SiluMulFn silu_mul;
extern const AttendFn attend;
}  // namespace avx2
namespace avx512 {
extern const SiluMulFn silu_mul;
extern const AttendFn attend;
}  // namespace avx512
namespace neon {
extern const SiluMulFn silu_mul;
extern const AttendFn attend;
}  // namespace neon

}  // namespace herd::kernels
