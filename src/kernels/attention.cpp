#include "kernels/attention.h"

#include <algorithm>
#include <cmath>

#include "quant/float16.h"

namespace herd::kernels {

namespace scalar {

void silu_mul(float* x, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
}

void attend(const AttendArgs& a) {
  for (int64_t h = 0; h < a.n_q; ++h) {
    const float* q = a.q + h * a.k_dim;
    float* scores = a.scores;
    float* out = a.out + h * a.v_dim;
    float max = a.sinks != nullptr ? a.sinks[h] : -INFINITY;
    for (int64_t j = 0; j < a.n_pos; ++j) {
      const uint16_t* k = a.keys + j * a.stride;
      float dot = 0;
      for (int64_t d = 0; d < a.k_dim; ++d) dot += q[d] * fp16_to_fp32(k[d]);
      scores[j] = dot * a.scale;
      max = std::max(max, scores[j]);
    }
    float sum = a.sinks != nullptr ? std::exp(a.sinks[h] - max) : 0.0f;
    for (int64_t j = 0; j < a.n_pos; ++j) sum += scores[j] = std::exp(scores[j] - max);
    std::fill(out, out + a.v_dim, 0.0f);
    for (int64_t j = 0; j < a.n_pos; ++j) {
      const uint16_t* v = a.values + j * a.stride;
      const float p = scores[j];
      for (int64_t d = 0; d < a.v_dim; ++d) out[d] += p * fp16_to_fp32(v[d]);
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < a.v_dim; ++d) out[d] *= inv;
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

AttendFn attend_kernel(Isa isa, int64_t k_dim, int64_t v_dim) {
  // Keys and values of one size up to 256 fit the registers (attend); longer or unequal ones
  // (MLA) stream through memory (attend_wide).
  const bool fits = k_dim == v_dim && k_dim <= 256;
  auto multiple = [&](int64_t width) { return k_dim % width == 0 && v_dim % width == 0; };
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512 && multiple(16)) return fits ? avx512::attend : avx512::attend_wide;
  if ((isa == Isa::kAvx512 || isa == Isa::kAvx2) && multiple(8))
    return fits ? avx2::attend : avx2::attend_wide;
#elif defined(__aarch64__)
  if (isa == Isa::kNeon && multiple(4)) return fits ? neon::attend : neon::attend_wide;
#else
  static_cast<void>(fits);
  static_cast<void>(multiple);
#endif
  return &scalar::attend;
}

}  // namespace herd::kernels
