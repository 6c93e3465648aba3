#include "engine/ops.h"

#include <algorithm>
#include <cmath>

#include "quant/float16.h"

namespace herd::engine {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0;  // double: n can be 8k and the reference sums in higher precision too
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope(float* x, int64_t head_dim, int64_t pos, float base, RopeStyle style,
          const float* freq_factors) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    // theta_i = pos * base^(-2i / head_dim) / factor_i
    double theta = static_cast<double>(pos) *
                   std::pow(static_cast<double>(base),
                            -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (freq_factors != nullptr) theta /= freq_factors[i];
    const float c = static_cast<float>(std::cos(theta));
    const float s = static_cast<float>(std::sin(theta));
    const int64_t a = style == RopeStyle::kAdjacentPairs ? 2 * i : i;
    const int64_t b = style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
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

void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
            int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out) {
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* k = keys + j * stride;
    float dot = 0;
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * fp16_to_fp32(k[d]);
    scores[j] = dot * scale;
  }
  softmax(scores, n_pos);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* v = values + j * stride;
    const float p = scores[j];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * fp16_to_fp32(v[d]);
  }
}

}  // namespace herd::engine
