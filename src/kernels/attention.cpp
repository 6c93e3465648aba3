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
  const bool sinks = a.sinks != nullptr && a.partial == nullptr;
  for (int64_t h = 0; h < a.n_q; ++h) {
    const float* q = a.q + h * a.k_dim;
    float* scores = a.scores;
    float* out = a.out + h * a.v_dim;
    float max = sinks ? a.sinks[h] : -INFINITY;
    for (int64_t j = 0; j < a.n_pos; ++j) {
      const uint16_t* k = a.keys + j * a.stride;
      float dot = 0;
      for (int64_t d = 0; d < a.k_dim; ++d) dot += q[d] * fp16_to_fp32(k[d]);
      scores[j] = dot * a.scale;
      max = std::max(max, scores[j]);
    }
    float sum = sinks ? std::exp(a.sinks[h] - max) : 0.0f;
    for (int64_t j = 0; j < a.n_pos; ++j) sum += scores[j] = std::exp(scores[j] - max);
    std::fill(out, out + a.v_dim, 0.0f);
    for (int64_t j = 0; j < a.n_pos; ++j) {
      const uint16_t* v = a.values + j * a.stride;
      const float p = scores[j];
      for (int64_t d = 0; d < a.v_dim; ++d) out[d] += p * fp16_to_fp32(v[d]);
    }
    if (a.partial != nullptr) {
      a.partial[2 * h] = max;
      a.partial[2 * h + 1] = sum;
      continue;
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

bool attend_takes_partial(int64_t k_dim, int64_t v_dim) {
  return !(k_dim == v_dim && k_dim <= 256);
}

AttendFn attend_kernel(Isa isa, int64_t k_dim, int64_t v_dim) {
  // Keys and values of one size up to 256 fit the registers (attend); longer or unequal ones
  // (MLA) stream through memory (attend_lanes on x86, attend_wide on arm64).
  const bool fits = !attend_takes_partial(k_dim, v_dim);
  auto multiple = [&](int64_t width) { return k_dim % width == 0 && v_dim % width == 0; };
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512 && multiple(16)) return fits ? avx512::attend : avx512::attend_lanes;
  if ((isa == Isa::kAvx512 || isa == Isa::kAvx2) && multiple(8))
    return fits ? avx2::attend : avx2::attend_lanes;
#elif defined(__aarch64__)
  if (isa == Isa::kNeon && multiple(4)) return fits ? neon::attend : neon::attend_wide;
#else
  static_cast<void>(fits);
  static_cast<void>(multiple);
#endif
  return &scalar::attend;
}

int64_t attend_scratch_floats(int64_t n_q, int64_t n_pos, int64_t k_dim, int64_t v_dim) {
  if (!attend_takes_partial(k_dim, v_dim)) return n_q * n_pos;  // scores of every head
  // The widest case: attend_lanes with 16 lanes and 16 rows per block (attention_simd.h);
  // attend_wide takes 32 scores per head, the scalar kernel one head's.
  constexpr int64_t kLanes = 16, kRows = 16;
  const int64_t groups = (n_q + kLanes - 1) / kLanes;
  const int64_t lanes = groups * kLanes * (k_dim + v_dim + kRows + 2) + kRows * kLaneDims;
  return std::max({lanes, n_q * std::min<int64_t>(n_pos, 32), n_pos});
}

void merge_attention(const float* partials, const float* outs, int64_t n_chunks, int64_t n_q,
                     int64_t v_dim, const float* sinks, float* out) {
  for (int64_t h = 0; h < n_q; ++h) {
    float max = sinks != nullptr ? sinks[h] : -INFINITY;
    for (int64_t c = 0; c < n_chunks; ++c) max = std::max(max, partials[(c * n_q + h) * 2]);
    float sum = sinks != nullptr ? std::exp(sinks[h] - max) : 0.0f;
    float* o = out + h * v_dim;
    std::fill(o, o + v_dim, 0.0f);
    for (int64_t c = 0; c < n_chunks; ++c) {
      const float* p = partials + (c * n_q + h) * 2;
      const float weight = std::exp(p[0] - max);
      sum += p[1] * weight;
      const float* chunk = outs + (c * n_q + h) * v_dim;
      for (int64_t d = 0; d < v_dim; ++d) o[d] += weight * chunk[d];
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < v_dim; ++d) o[d] *= inv;
  }
}

}  // namespace herd::kernels
