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

void rope_angles(int64_t pos, int64_t head_dim, float base, const float* freq_factors, float* cos,
                 float* sin) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double theta = static_cast<double>(pos) *
                   std::pow(static_cast<double>(base),
                            -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (freq_factors != nullptr) theta /= freq_factors[i];
    cos[i] = static_cast<float>(std::cos(theta));
    sin[i] = static_cast<float>(std::sin(theta));
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
