// The element-wise and attention operations of the forward pass, on floats. Written as
// plain loops the compiler vectorizes; the matrix products (where the time goes) are in
// kernels/. Shapes are given on every argument.
#pragma once

#include <cstdint>

#include "model/arch.h"

namespace herd::engine {

// out[i] = x[i] / rms(x) * weight[i]; x, weight, out: [n]. out may alias x.
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// out[i] = x[i] / rms(x): RMSNorm without a weight (DeepSeek V4's per-head query norm and
// its hyper-connections' input). x, out: [n]; out may alias x.
void rms_norm_plain(const float* x, int64_t n, float eps, float* out);

// How a layer's rope turns positions into angles (ggml's rope with its YaRN extension).
struct Rope {
  int64_t n_rot = 0;  // dimensions rotated (n_rot / 2 pairs)
  float base = 10000.0f;
  float freq_scale = 1.0f;  // linear and YaRN: 1 / rope.scaling.factor
  bool yarn = false;
  // YaRN: pair i blends the scaled angle with the unscaled one by r_i = 1 - clamp((i - low) /
  // (high - low), 0, 1), the correction dims of beta_fast and beta_slow.
  float corr_low = 0.0f, corr_high = 0.0f;
  float magnitude = 1.0f;               // cos and sin are multiplied by it
  const float* freq_factors = nullptr;  // [n_rot / 2] divisors of the angles (Llama 3), or null
};
// The rope of a layer with these options (freq_factors: rope_freqs.weight or null).
Rope make_rope(const ArchSpec& arch, const HParams& hp, const LayerOptions& layer,
               const float* freq_factors);
// The scale on q . k of a layer's attention: 1 / sqrt(head_dim), times DeepSeek's YaRN
// mscale^2 where the architecture puts it there (Gemma 4: 1).
float attention_scale(const ArchSpec& arch, const HParams& hp, const LayerOptions& layer);

// The rotation of each pair of a head at position pos: cos[i], sin[i] for i < n_rot / 2.
// Computed once per token, applied to every head of it.
void rope_angles(const Rope& rope, int64_t pos, float* cos, float* sin);

// Rotates one head x [head_dim] in place by the angles of rope_angles().
void rope_apply(float* x, int64_t head_dim, RopeStyle style, const float* cos, const float* sin);

// x[i] = silu(x[i]) * up[i]; x, up: [n].
void silu_mul(float* x, const float* up, int64_t n);

// x[i] = gelu(x[i]) * up[i] with the tanh approximation; x, up: [n].
void gelu_tanh_mul(float* x, const float* up, int64_t n);

// gpt-oss's gated unit: g = min(x, 7), u = clamp(up, -7, 7), x[i] = g sigmoid(1.702 g) (u + 1).
void swiglu_oai_mul(float* x, const float* up, int64_t n);

// DeepSeek V4's clamped SwiGLU: x[i] = min(silu(x[i]), limit) * clamp(up[i], -limit, limit);
// the activated gate is clamped, not its input. x, up: [n].
void silu_clamp_mul(float* x, const float* up, int64_t n, float limit);

// DeepSeek V4's router probabilities: x[i] = sqrt(softplus(x[i])), softplus(v) = v for v > 20
// (as ggml). x: [n].
void sqrt_softplus(float* x, int64_t n);

// In-place softmax of x [n].
void softmax(float* x, int64_t n);

}  // namespace herd::engine
