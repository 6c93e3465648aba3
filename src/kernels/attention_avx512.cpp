// AVX-512 attention: F16 keys and values widened with vcvtph2ps, four positions per step
// for independent FMA chains, and a vector exp for the softmax.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

namespace herd::kernels::avx512 {
namespace {

// e^x for x <= 0 (softmax arguments after subtracting the maximum): x = n ln2 + r with
// |r| <= ln2 / 2, e^r by its degree-6 Taylor polynomial (relative error < 2e-7), times 2^n.
inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);  // ln2 split in two
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

}  // namespace

void attend(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
            int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out) {
  const int64_t nv = head_dim / 16;
  __m512 qv[16];
  for (int64_t i = 0; i < nv; ++i)
    qv[i] = _mm512_mul_ps(_mm512_loadu_ps(q + 16 * i), _mm512_set1_ps(scale));

  // Scores, four keys at a time.
  int64_t j = 0;
  for (; j + 4 <= n_pos; j += 4) {
    const uint16_t* k = keys + j * stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < nv; ++i) {
      a0 = _mm512_fmadd_ps(qv[i], load_f16(k + 16 * i), a0);
      a1 = _mm512_fmadd_ps(qv[i], load_f16(k + stride + 16 * i), a1);
      a2 = _mm512_fmadd_ps(qv[i], load_f16(k + 2 * stride + 16 * i), a2);
      a3 = _mm512_fmadd_ps(qv[i], load_f16(k + 3 * stride + 16 * i), a3);
    }
    scores[j] = _mm512_reduce_add_ps(a0);
    scores[j + 1] = _mm512_reduce_add_ps(a1);
    scores[j + 2] = _mm512_reduce_add_ps(a2);
    scores[j + 3] = _mm512_reduce_add_ps(a3);
  }
  for (; j < n_pos; ++j) {
    const uint16_t* k = keys + j * stride;
    __m512 a = _mm512_setzero_ps();
    for (int64_t i = 0; i < nv; ++i) a = _mm512_fmadd_ps(qv[i], load_f16(k + 16 * i), a);
    scores[j] = _mm512_reduce_add_ps(a);
  }

  // Softmax weights (unnormalized) and their sum.
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (j = 0; j + 16 <= n_pos; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(scores + j));
  float max = _mm512_reduce_max_ps(vmax);
  for (; j < n_pos; ++j) max = std::max(max, scores[j]);
  const __m512 m = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (j = 0; j + 16 <= n_pos; j += 16) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(scores + j), m));
    _mm512_storeu_ps(scores + j, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (j < n_pos) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n_pos - j)) - 1);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, scores + j), m));
    _mm512_mask_storeu_ps(scores + j, tail, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(tail, e));
  }
  const float sum = _mm512_reduce_add_ps(vsum);

  // Weighted sum of the values.
  __m512 acc[16];
  for (int64_t i = 0; i < nv; ++i) acc[i] = _mm512_setzero_ps();
  for (j = 0; j < n_pos; ++j) {
    const __m512 p = _mm512_set1_ps(scores[j]);
    const uint16_t* v = values + j * stride;
    for (int64_t i = 0; i < nv; ++i) acc[i] = _mm512_fmadd_ps(p, load_f16(v + 16 * i), acc[i]);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < nv; ++i) _mm512_storeu_ps(out + 16 * i, _mm512_mul_ps(acc[i], inv));
}

}  // namespace herd::kernels::avx512
