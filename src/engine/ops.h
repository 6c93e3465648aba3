// The element-wise and attention operations of the forward pass, on floats. Written as
// plain loops the compiler vectorizes; the matrix products (where the time goes) are in
// kernels/. Shapes are given on every argument.
#pragma once

#include <cstdint>

#include "model/arch.h"

namespace herd::engine {

// out[i] = x[i] / rms(x) * weight[i]; x, weight, out: [n]. out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotates one head in place: x [head_dim] at position pos. freq_factors [head_dim / 2]
// divides each pair's frequency (Llama 3 rope scaling) or is null.
void rope(float* x, int64_t head_dim, int64_t pos, float base, RopeStyle style,
          const float* freq_factors);

// x[i] = silu(x[i]) * up[i]; x, up: [n].
void silu_mul(float* x, const float* up, int64_t n);

// In-place softmax of x [n].
void softmax(float* x, int64_t n);

// One query head against the cached keys and values of positions [0, n_pos):
// out [head_dim] = sum_j softmax_j(q . k_j * scale) v_j, with k_j = keys + j * stride,
// v_j = values + j * stride, both F16. scores: scratch of n_pos floats.
void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
            int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out);

}  // namespace herd::engine
