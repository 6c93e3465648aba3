// AVX2 gated delta rule: delta_net_simd.h over 8-float vectors.
#include <immintrin.h>

#include "kernels/delta_net.h"
#include "kernels/delta_net_simd.h"

namespace herd::kernels::avx2 {
namespace {

struct V {
  using F = __m256;
  static constexpr int64_t kWidth = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce_add(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

}  // namespace

extern const DeltaRuleFn delta_rule_recurrent = &recurrent_with<V>;
extern const DeltaRuleFn delta_rule_chunked = &chunked_with<V>;

}  // namespace herd::kernels::avx2
