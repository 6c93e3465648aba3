// AVX-512 attention: the shared kernel (attention_simd.h) over 16-float vectors.
#include <immintrin.h>

#include "kernels/attention.h"
#include "kernels/attention_simd.h"

namespace herd::kernels::avx512 {
namespace {

struct V {
  using F = __m512;
  static constexpr int64_t kWidth = 16;
  // attend_wide: heads per run (32 registers: 8 heads x 2 rows of accumulators, the
  // rows, q).
  static constexpr int kWideHeads = 8;
  // attend_lanes: cached rows per block (16 accumulators and q in 32 registers).
  static constexpr int64_t kLaneRows = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce_add(F v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(F v) { return _mm512_reduce_max_ps(v); }
  static F neg_abs(F v) {  // sets the sign bit (vorps would need AVX512DQ)
    return _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int32_t(0x80000000u))));
  }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F if_nonnegative(F v, F a, F b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ), b, a);
  }
  static F round(F v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static F scale2(F p, F n) { return _mm512_scalef_ps(p, n); }
};

}  // namespace

extern const SiluMulFn silu_mul = &silu_mul_with<V>;
extern const AttendFn attend = &attend_with<V>;
extern const AttendFn attend_wide = &attend_wide_with<V>;
extern const AttendFn attend_lanes = &attend_lanes_with<V>;

}  // namespace herd::kernels::avx512
