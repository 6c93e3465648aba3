// NEON attention: the shared kernel (attention_simd.h) over 4-float vectors, and the FFN's
// SiLU product with its vector exp. F16 keys and values widen with vcvt_f32_f16 (AArch64's
// baseline AdvSIMD), so this needs no extension beyond armv8-a.
#include <arm_neon.h>

#include "kernels/attention.h"
#include "kernels/attention_simd.h"

namespace herd::kernels::neon {
namespace {

struct V {
  using F = float32x4_t;
  static constexpr int64_t kWidth = 4;
  // attend_wide: heads per run (32 registers: 8 heads x 2 rows of accumulators, the
  // rows, q).
  static constexpr int kWideHeads = 8;
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float v) { return vdupq_n_f32(v); }
  static F load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static F load_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static float reduce_add(F v) { return vaddvq_f32(v); }
  static float reduce_max(F v) { return vmaxvq_f32(v); }
  static F neg_abs(F v) { return vnegq_f32(vabsq_f32(v)); }
  static F div(F a, F b) { return vdivq_f32(a, b); }
  static F if_nonnegative(F v, F a, F b) { return vbslq_f32(vcgezq_f32(v), a, b); }
  static F round(F v) { return vrndnq_f32(v); }
  // p * 2^n: n + 127 straight into the exponent bits (n >= -126 after the clamp at -87).
  static F scale2(F p, F n) {
    const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(bits));
  }
};

}  // namespace

extern const SiluMulFn silu_mul = &silu_mul_with<V>;
extern const AttendFn attend = &attend_with<V>;
extern const AttendFn attend_wide = &attend_wide_with<V>;

}  // namespace herd::kernels::neon
