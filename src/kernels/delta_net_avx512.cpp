// AVX-512 gated delta rule: delta_net_simd.h over 16-float vectors.
#include <immintrin.h>

#include "kernels/delta_net.h"
#include "kernels/delta_net_simd.h"

namespace herd::kernels::avx512 {
namespace {

struct V {
  using F = __m512;
  static constexpr int64_t kWidth = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce_add(F v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

extern const DeltaRuleFn delta_rule_recurrent = &recurrent_with<V>;
extern const DeltaRuleFn delta_rule_chunked = &chunked_with<V>;

}  // namespace herd::kernels::avx512
