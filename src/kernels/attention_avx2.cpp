// AVX2 attention: the shared kernel (attention_simd.h) over 8-float vectors.
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/attention_simd.h"

namespace herd::kernels::avx2 {
namespace {

struct V {
  using F = __m256;
  static constexpr int64_t kWidth = 8;
  // attend_wide: heads per run (16 registers: 4 heads x 2 rows of accumulators, the
  // rows, q).
  static constexpr int kWideHeads = 4;
  // attend_lanes: cached rows per block (8 accumulators and q in 16 registers).
  static constexpr int64_t kLaneRows = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce_add(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(F v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static F neg_abs(F v) { return _mm256_or_ps(v, _mm256_set1_ps(-0.0f)); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F if_nonnegative(F v, F a, F b) {
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ));
  }
  static F round(F v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // p * 2^n: n + 127 straight into the exponent bits (n >= -126 after the clamp at -87).
  static F scale2(F p, F n) {
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  }
};

}  // namespace

extern const SiluMulFn silu_mul = &silu_mul_with<V>;
extern const AttendFn attend = &attend_with<V>;
extern const AttendFn attend_wide = &attend_wide_with<V>;
extern const AttendFn attend_lanes = &attend_lanes_with<V>;

}  // namespace herd::kernels::avx2
