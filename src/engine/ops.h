// The element-wise and attention operations of the forward pass, on floats. Written as
// plain loops the compiler vectorizes; the matrix products (where the time goes) are in
// kernels/. Shapes are given on every argument.
#pragma once

#include <cstdint>

#include "model/arch.h"

namespace herd::engine {

// out[i] = x[i] / rms(x) * weight[i]; x, weight, out: [n]. out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// The rotation of each pair of a head at position pos: cos[i], sin[i] of
// theta_i = pos * base^(-2i / head_dim) / freq_factors[i], for i < head_dim / 2.
// freq_factors (Llama 3 rope scaling) may be null. Computed once per token, applied to
// every head of it.
void rope_angles(int64_t pos, int64_t head_dim, float base, const float* freq_factors, float* cos,
                 float* sin);

// Rotates one head x [head_dim] in place by the angles of rope_angles().
void rope_apply(float* x, int64_t head_dim, RopeStyle style, const float* cos, const float* sin);

// x[i] = silu(x[i]) * up[i]; x, up: [n].
void silu_mul(float* x, const float* up, int64_t n);

// In-place softmax of x [n].
void softmax(float* x, int64_t n);

}  // namespace herd::engine
