// NEON gated delta rule: delta_net_simd.h over 4-float vectors (AArch64's baseline AdvSIMD).
#include <arm_neon.h>

#include "kernels/delta_net.h"
#include "kernels/delta_net_simd.h"

namespace herd::kernels::neon {
namespace {

struct V {
  using F = float32x4_t;
  static constexpr int64_t kWidth = 4;
  static F zero() { return vdupq_n_f32(0.0f); }
  static F set1(float v) { return vdupq_n_f32(v); }
  static F load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static float reduce_add(F v) { return vaddvq_f32(v); }
};

}  // namespace

extern const DeltaRuleFn delta_rule_recurrent = &recurrent_with<V>;
extern const DeltaRuleFn delta_rule_chunked = &chunked_with<V>;

}  // namespace herd::kernels::neon
