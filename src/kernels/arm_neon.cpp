// arm64 NEON kernels (with the dot-product extension, ARMv8.2 sdot): the primitives the
// panel and float algorithms are written over, and this ISA's rows of the kernel table.
// Compiled with -march=armv8.2-a+dotprod+fp16 (CMakeLists.txt); only called when
// detect_cpu() found dotprod.
//
// A panel lane vector (16 rows x 4 bytes) is four 128-bit registers (rows 0-3, 4-7, 8-11,
// 12-15). sdot multiplies signed bytes by signed bytes, 16 products per instruction, with
// the activations' 4 bytes taken from a broadcast; the panels' unsigned quants are all
// below 128, so they read the same as signed bytes, and q8_0 needs no bias.
#include <arm_neon.h>

#include "kernels/activations.h"
#include "kernels/float_gemm.h"
#include "kernels/iq_grid_kernels.h"
#include "kernels/kernel_table.h"
#include "kernels/panel_gemm.h"
#include "kernels/panel_iq4_gemm.h"
#include "kernels/panel_layout.h"

namespace herd::kernels::neon {
namespace {

struct Ops {
  struct I {
    int32x4_t v[4];  // rows 0-3, 4-7, 8-11, 12-15
  };
  struct F {
    float32x4_t v[4];
  };
  using Q8W = I;
  static constexpr int kQ8Offset = 0;

  template <typename Fn>
  static I each(I a, I b, Fn fn) {
    return {{fn(a.v[0], b.v[0]), fn(a.v[1], b.v[1]), fn(a.v[2], b.v[2]), fn(a.v[3], b.v[3])}};
  }
  template <typename Fn>
  static I each(I a, Fn fn) {
    return {{fn(a.v[0]), fn(a.v[1]), fn(a.v[2]), fn(a.v[3])}};
  }

  static I load(const void* p) {
    const int32_t* q = static_cast<const int32_t*>(p);
    return {{vld1q_s32(q), vld1q_s32(q + 4), vld1q_s32(q + 8), vld1q_s32(q + 12)}};
  }
  static I zero() { return {{vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)}}; }
  static I set1_8(uint8_t b) {
    const int32x4_t v = vreinterpretq_s32_u8(vdupq_n_u8(b));
    return {{v, v, v, v}};
  }
  static I set1_32(int32_t x) {
    const int32x4_t v = vdupq_n_s32(x);
    return {{v, v, v, v}};
  }
  static I and_(I a, I b) {
    return each(a, b, [](int32x4_t x, int32x4_t y) { return vandq_s32(x, y); });
  }
  static I or_(I a, I b) {
    return each(a, b, [](int32x4_t x, int32x4_t y) { return vorrq_s32(x, y); });
  }
  template <int n>
  static I srl16(I a) {
    return each(a, [](int32x4_t x) {
      return vreinterpretq_s32_u16(vshrq_n_u16(vreinterpretq_u16_s32(x), n));
    });
  }
  template <int n>
  static I sll16(I a) {
    return each(a, [](int32x4_t x) {
      return vreinterpretq_s32_u16(vshlq_n_u16(vreinterpretq_u16_s32(x), n));
    });
  }
  template <int n>
  static I sll32(I a) {
    return each(a, [](int32x4_t x) { return vshlq_n_s32(x, n); });
  }
  template <int n>
  static I sra32(I a) {
    return each(a, [](int32x4_t x) { return vshrq_n_s32(x, n); });
  }
  static I add32(I a, I b) {
    return each(a, b, [](int32x4_t x, int32x4_t y) { return vaddq_s32(x, y); });
  }
  static I sub32(I a, I b) {
    return each(a, b, [](int32x4_t x, int32x4_t y) { return vsubq_s32(x, y); });
  }
  static I mul32(I a, I b) {
    return each(a, b, [](int32x4_t x, int32x4_t y) { return vmulq_s32(x, y); });
  }
  static I widen_u8(const uint8_t* p) {
    I r;
    for (int i = 0; i < 4; ++i) r.v[i] = vreinterpretq_s32_u16(vmovl_u8(vld1_u8(p + 8 * i)));
    return r;
  }
  static I widen_s8(const uint8_t* p) {
    I r;
    for (int i = 0; i < 4; ++i) {
      r.v[i] = vreinterpretq_s32_s16(vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(p) + 8 * i)));
    }
    return r;
  }
  static constexpr bool kSumsInt16 = false;
  static I dot_u8(I acc, I w, int32_t x4) {
    const int8x16_t x = vreinterpretq_s8_s32(vdupq_n_s32(x4));
    for (int i = 0; i < 4; ++i) acc.v[i] = vdotq_s32(acc.v[i], vreinterpretq_s8_s32(w.v[i]), x);
    return acc;
  }
  static Q8W prep_q8(I v) { return v; }
  // 16-level tables (panel_iq4_gemm.h): sdot takes the signed levels as they are.
  using Q8Table = int8x16_t;
  static Q8Table table_q8(const int8_t* levels) { return vld1q_s8(levels); }
  static Q8W lookup_q8(Q8Table t, I idx) {
    for (int i = 0; i < 4; ++i)
      idx.v[i] = vreinterpretq_s32_s8(vqtbl1q_s8(t, vreinterpretq_u8_s32(idx.v[i])));
    return idx;
  }
  static F load_e8m0(const uint8_t* e) {
    const uint8x16_t bytes = vld1q_u8(e);
    const uint16x8_t lo = vmovl_u8(vget_low_u8(bytes)), hi = vmovl_high_u8(bytes);
    const uint16x4_t parts[4] = {vget_low_u16(lo), vget_high_u16(lo), vget_low_u16(hi),
                                 vget_high_u16(hi)};
    F r;
    for (int i = 0; i < 4; ++i)
      r.v[i] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(parts[i]), 23));
    return r;
  }
  static I dot_q8(I acc, Q8W w, int32_t x4) { return dot_u8(acc, w, x4); }
  static I dot_i16(I acc, I a, int32_t x2) {
    const int16x8_t x = vreinterpretq_s16_s32(vdupq_n_s32(x2));
    for (int i = 0; i < 4; ++i) {
      const int16x8_t v = vreinterpretq_s16_s32(a.v[i]);
      const int32x4_t lo = vmull_s16(vget_low_s16(v), vget_low_s16(x));
      const int32x4_t hi = vmull_high_s16(v, x);
      acc.v[i] = vaddq_s32(acc.v[i], vpaddq_s32(lo, hi));  // pairs of products per row
    }
    return acc;
  }

  static F zerof() { return {{vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)}}; }
  static F set1(float x) {
    const float32x4_t v = vdupq_n_f32(x);
    return {{v, v, v, v}};
  }
  static F fma(F a, F b, F c) {
    for (int i = 0; i < 4; ++i) c.v[i] = vfmaq_f32(c.v[i], a.v[i], b.v[i]);
    return c;
  }
  static F mul(F a, F b) {
    for (int i = 0; i < 4; ++i) a.v[i] = vmulq_f32(a.v[i], b.v[i]);
    return a;
  }
  static F cvt(I a) {
    F r;
    for (int i = 0; i < 4; ++i) r.v[i] = vcvtq_f32_s32(a.v[i]);
    return r;
  }
  static F load_f16(const uint16_t* p) {
    F r;
    for (int i = 0; i < 4; ++i) r.v[i] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4 * i)));
    return r;
  }
  static void store(float* y, F a, int n) {
    if (n == 16) {
      for (int i = 0; i < 4; ++i) vst1q_f32(y + 4 * i, a.v[i]);
      return;
    }
    float tmp[16];
    for (int i = 0; i < 4; ++i) vst1q_f32(tmp + 4 * i, a.v[i]);
    for (int i = 0; i < n; ++i) y[i] = tmp[i];
  }
};

struct FloatOps {
  using V = float32x4_t;
  static constexpr int kWidth = 4;
  static V zero() { return vdupq_n_f32(0); }
  static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  static float hsum(V v) { return vaddvq_f32(v); }
  // Partial loads copy the n valid elements into a zeroed buffer: once per row tail.
  template <typename Elem>
  static V load_partial(const Elem* p, int n) {
    Elem tmp[kWidth] = {};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return load(tmp);
  }
  static V load(const float* p) { return vld1q_f32(p); }
  static V load(const HalfBits* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
  }
  static V load(const BrainBits* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p)), 16));
  }
};

// Tokens per tile: a panel vector takes 4 of the 32 registers, so tiles stay narrow.
constexpr int kLegacyTokens = 2;
constexpr int kKTokens = 2;

template <template <class> class U>
constexpr void (*legacy_gemm)(const GemmArgs&) =
    &PanelGemm<Ops, LegacyTile, U<Ops>, kLegacyTokens>::gemm;
template <template <class> class U>
constexpr void (*k_gemm)(const GemmArgs&) = &PanelGemm<Ops, KTile, U<Ops>, kKTokens>::gemm;

// The activation quantizers are the baseline ones (activations.cpp).
constexpr MatmulKernel kKernels[] = {
    {TensorType::Q4_0, Isa::kNeon, kPanelRows, act_offset_row_bytes, quantize_act_offset<8>,
     q4_0_panel_bytes, pack_q4_0, nullptr, legacy_gemm<UnpackQ4_0>},
    {TensorType::Q4_1, Isa::kNeon, kPanelRows, act_offset_row_bytes, quantize_act_min,
     q4_1_panel_bytes, pack_q4_1, nullptr, legacy_gemm<UnpackQ4_1>},
    {TensorType::Q5_0, Isa::kNeon, kPanelRows, act_offset_row_bytes, quantize_act_offset<16>,
     q5_0_panel_bytes, pack_q5_0, nullptr, legacy_gemm<UnpackQ5_0>},
    {TensorType::Q5_1, Isa::kNeon, kPanelRows, act_offset_row_bytes, quantize_act_min,
     q5_1_panel_bytes, pack_q5_1, nullptr, legacy_gemm<UnpackQ5_1>},
    {TensorType::Q8_0, Isa::kNeon, kPanelRows, act_offset_row_bytes,
     quantize_act_offset<Ops::kQ8Offset>, q8_0_panel_bytes, pack_q8_0, nullptr,
     legacy_gemm<UnpackQ8_0>},
    {TensorType::Q2_K, Isa::kNeon, kPanelRows, act_k_row_bytes, quantize_act_k, q2_k_panel_bytes,
     pack_q2_k, nullptr, k_gemm<UnpackQ2_K>},
    {TensorType::Q3_K, Isa::kNeon, kPanelRows, act_k_row_bytes, quantize_act_k, q3_k_panel_bytes,
     pack_q3_k, nullptr, k_gemm<UnpackQ3_K>},
    {TensorType::Q4_K, Isa::kNeon, kPanelRows, act_k_row_bytes, quantize_act_k, q4_k_panel_bytes,
     pack_q4_k, nullptr, k_gemm<UnpackQ4_K>},
    {TensorType::Q5_K, Isa::kNeon, kPanelRows, act_k_row_bytes, quantize_act_k, q5_k_panel_bytes,
     pack_q5_k, nullptr, k_gemm<UnpackQ5_K>},
    {TensorType::Q6_K, Isa::kNeon, kPanelRows, act_k_row_bytes, quantize_act_k, q6_k_panel_bytes,
     pack_q6_k, nullptr, k_gemm<UnpackQ6_K>},
    {TensorType::IQ2_XXS, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq2_xxs},
    {TensorType::IQ2_XS, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq2_xs},
    {TensorType::IQ2_S, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq2_s},
    {TensorType::IQ3_XXS, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq3_xxs},
    {TensorType::IQ3_S, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq3_s},
    {TensorType::IQ1_S, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq1_s},
    {TensorType::IQ1_M, Isa::kNeon, 1, act_k_row_bytes, quantize_act_k, nullptr, nullptr,
     iq_grid::neon::scratch_bytes, iq_grid::neon::gemm_iq1_m},
    {TensorType::IQ4_NL, Isa::kNeon, kPanelRows, act_offset_row_bytes,
     quantize_act_offset<Ops::kQ8Offset>, q4_0_panel_bytes, pack_q4_0, nullptr,
     legacy_gemm<UnpackIQ4_NL>},
    {TensorType::MXFP4, Isa::kNeon, kPanelRows, act_offset_row_bytes,
     quantize_act_offset<Ops::kQ8Offset>, mxfp4_panel_bytes, pack_mxfp4, nullptr,
     legacy_gemm<UnpackMXFP4>},
    {TensorType::IQ4_XS, Isa::kNeon, kPanelRows, act_k_row_bytes, quantize_act_k,
     iq4_xs_panel_bytes, pack_iq4_xs, nullptr,
     &PanelGemm<Ops, Iq4XsTile, UnpackIQ4_XS<Ops>, kKTokens>::gemm},
    {TensorType::F32, Isa::kNeon, 1, act_float_row_bytes, copy_act_f32, nullptr, nullptr, nullptr,
     FloatGemm<FloatOps, float, 4, 4>::gemm},
    {TensorType::F16, Isa::kNeon, 1, act_float_row_bytes, copy_act_f32, nullptr, nullptr, nullptr,
     FloatGemm<FloatOps, HalfBits, 4, 4>::gemm},
    {TensorType::BF16, Isa::kNeon, 1, act_float_row_bytes, round_act_bf16, nullptr, nullptr,
     nullptr, FloatGemm<FloatOps, BrainBits, 4, 4>::gemm},
};

}  // namespace

std::span<const MatmulKernel> matmul_kernels() {
  return kKernels;
}

}  // namespace herd::kernels::neon
