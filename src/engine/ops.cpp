#include "engine/ops.h"

#include <algorithm>
#include <cmath>

namespace herd::engine {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0;  // double: n can be 8k and the reference sums in higher precision too
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rms_norm_plain(const float* x, int64_t n, float eps, float* out) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
}

namespace {

// The pair index (as a float) below which YaRN keeps a dimension's angle unscaled: the one
// that turns `rotations` times over the original context (ggml's corr_dim).
double yarn_corr_dim(int64_t n_rot, int64_t original_ctx, double rotations, double base) {
  return static_cast<double>(n_rot) *
         std::log(static_cast<double>(original_ctx) / (rotations * 2 * M_PI)) /
         (2 * std::log(base));
}

}  // namespace

Rope make_rope(const ArchSpec& arch, const HParams& hp, const LayerOptions& layer,
               const float* freq_factors) {
  Rope r;
  r.n_rot = layer.n_rot > 0 ? layer.n_rot : hp.n_rot;
  r.base = layer.rope_base;
  r.freq_factors = freq_factors;
  if (layer.rope_scaling == RopeScaling::kLinear || layer.rope_scaling == RopeScaling::kYarn) {
    r.freq_scale = 1.0f / hp.rope_factor;
  }
  if (layer.rope_scaling == RopeScaling::kYarn) {
    r.yarn = true;
    const double low =
        std::floor(yarn_corr_dim(r.n_rot, hp.rope_original_ctx, hp.yarn_beta_fast, r.base));
    const double high =
        std::ceil(yarn_corr_dim(r.n_rot, hp.rope_original_ctx, hp.yarn_beta_slow, r.base));
    r.corr_low = static_cast<float>(std::max(0.0, low));
    r.corr_high = static_cast<float>(std::min(static_cast<double>(r.n_rot - 1), high));
    // ggml's rope scales cos and sin by 1 + 0.1 ln(factor); DeepSeek moves the correction
    // onto the attention logits instead (attention_scale).
    if (!arch.yarn_scale_on_logits) r.magnitude = 1.0f + 0.1f * std::log(hp.rope_factor);
  }
  return r;
}

float attention_scale(const ArchSpec& arch, const HParams& hp, const LayerOptions& layer) {
  if (arch.unit_attention_scale) return 1.0f;
  const int64_t head_dim = layer.head_dim > 0 ? layer.head_dim : hp.head_dim;
  float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (arch.yarn_scale_on_logits && hp.rope_scaling == RopeScaling::kYarn) {
    const float mscale = 1.0f + hp.yarn_log_multiplier * std::log(hp.rope_factor);
    scale *= mscale * mscale;
  }
  return scale;
}

void rope_angles(const Rope& rope, int64_t pos, float* cos, float* sin) {
  for (int64_t i = 0; i < rope.n_rot / 2; ++i) {
    double theta = static_cast<double>(pos) *
                   std::pow(static_cast<double>(rope.base),
                            -2.0 * static_cast<double>(i) / static_cast<double>(rope.n_rot));
    if (rope.freq_factors != nullptr) theta /= rope.freq_factors[i];
    double angle = theta * rope.freq_scale;
    if (rope.yarn) {
      const double y = (static_cast<double>(i) - rope.corr_low) /
                       std::max(0.001, static_cast<double>(rope.corr_high - rope.corr_low));
      const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
      angle = angle * (1.0 - ramp) + theta * ramp;
    }
    cos[i] = static_cast<float>(std::cos(angle)) * rope.magnitude;
    sin[i] = static_cast<float>(std::sin(angle)) * rope.magnitude;
  }
}

void rope_apply(float* x, int64_t head_dim, RopeStyle style, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
    const int64_t b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * cos[i] - x1 * sin[i];
    x[b] = x0 * sin[i] + x1 * cos[i];
  }
}

void silu_mul(float* x, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
}

void gelu_tanh_mul(float* x, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v))) * up[i];
  }
}

void swiglu_oai_mul(float* x, const float* up, int64_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(x[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    x[i] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
  }
}

void silu_clamp_mul(float* x, const float* up, int64_t n, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(x[i] / (1.0f + std::exp(-x[i])), limit);
    x[i] = g * std::clamp(up[i], -limit, limit);
  }
}

void sqrt_softplus(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sqrt(x[i] > 20.0f ? x[i] : std::log(1.0f + std::exp(x[i])));
  }
}

void softmax(float* x, int64_t n) {
  float max = *std::max_element(x, x + n);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace herd::engine
