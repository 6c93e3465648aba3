// AVX2 attention: as the AVX-512 kernel, eight values per register.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

namespace herd::kernels::avx2 {
namespace {

// e^x for x <= 0, as in the AVX-512 kernel; 2^n goes straight into the exponent bits.
inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float reduce_add(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
            int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out) {
  const int64_t nv = head_dim / 8;
  __m256 qv[32];
  for (int64_t i = 0; i < nv; ++i)
    qv[i] = _mm256_mul_ps(_mm256_loadu_ps(q + 8 * i), _mm256_set1_ps(scale));

  int64_t j = 0;
  for (; j + 4 <= n_pos; j += 4) {
    const uint16_t* k = keys + j * stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < nv; ++i) {
      a0 = _mm256_fmadd_ps(qv[i], load_f16(k + 8 * i), a0);
      a1 = _mm256_fmadd_ps(qv[i], load_f16(k + stride + 8 * i), a1);
      a2 = _mm256_fmadd_ps(qv[i], load_f16(k + 2 * stride + 8 * i), a2);
      a3 = _mm256_fmadd_ps(qv[i], load_f16(k + 3 * stride + 8 * i), a3);
    }
    scores[j] = reduce_add(a0);
    scores[j + 1] = reduce_add(a1);
    scores[j + 2] = reduce_add(a2);
    scores[j + 3] = reduce_add(a3);
  }
  for (; j < n_pos; ++j) {
    const uint16_t* k = keys + j * stride;
    __m256 a = _mm256_setzero_ps();
    for (int64_t i = 0; i < nv; ++i) a = _mm256_fmadd_ps(qv[i], load_f16(k + 8 * i), a);
    scores[j] = reduce_add(a);
  }

  float max = -INFINITY;
  for (j = 0; j < n_pos; ++j) max = std::max(max, scores[j]);
  const __m256 m = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n_pos; j += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(scores + j), m));
    _mm256_storeu_ps(scores + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = reduce_add(vsum);
  for (; j < n_pos; ++j) sum += scores[j] = std::exp(scores[j] - max);

  __m256 acc[32];
  for (int64_t i = 0; i < nv; ++i) acc[i] = _mm256_setzero_ps();
  for (j = 0; j < n_pos; ++j) {
    const __m256 p = _mm256_set1_ps(scores[j]);
    const uint16_t* v = values + j * stride;
    for (int64_t i = 0; i < nv; ++i) acc[i] = _mm256_fmadd_ps(p, load_f16(v + 8 * i), acc[i]);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < nv; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_mul_ps(acc[i], inv));
}

}  // namespace herd::kernels::avx2
