#include "kernels/attention.h"

#include <algorithm>
#include <cmath>

#include "quant/float16.h"

namespace herd::kernels {

namespace scalar {

void silu_mul(float* x, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
}

namespace {

void attend_one(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
                int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* k = keys + j * stride;
    float dot = 0;
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * fp16_to_fp32(k[d]);
    scores[j] = dot * scale;
    max = std::max(max, scores[j]);
  }
  float sum = 0;
  for (int64_t j = 0; j < n_pos; ++j) sum += scores[j] = std::exp(scores[j] - max);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* v = values + j * stride;
    const float p = scores[j];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * fp16_to_fp32(v[d]);
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

}  // namespace

void attend(const float* q, int64_t n_q, const uint16_t* keys, const uint16_t* values,
            int64_t stride, int64_t n_pos, int64_t head_dim, float scale, float* scores,
            float* out) {
  for (int64_t h = 0; h < n_q; ++h) {
    attend_one(q + h * head_dim, keys, values, stride, n_pos, head_dim, scale, scores,
               out + h * head_dim);
  }
}

}  // namespace scalar

SiluMulFn silu_mul_kernel(Isa isa) {
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512) return avx512::silu_mul;
  if (isa == Isa::kAvx2) return avx2::silu_mul;
#elif defined(__aarch64__)
  if (isa == Isa::kNeon) return neon::silu_mul;
#else
  static_cast<void>(isa);
#endif
  return &scalar::silu_mul;
}

AttendFn attend_kernel(Isa isa, int64_t head_dim) {
  const bool fits = head_dim <= 256;
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512 && fits && head_dim % 16 == 0) return avx512::attend;
  if ((isa == Isa::kAvx512 || isa == Isa::kAvx2) && fits && head_dim % 8 == 0) return avx2::attend;
#elif defined(__aarch64__)
  if (isa == Isa::kNeon && fits && head_dim % 4 == 0) return neon::attend;
#else
  static_cast<void>(fits);
#endif
  return &scalar::attend;
}

}  // namespace herd::kernels
