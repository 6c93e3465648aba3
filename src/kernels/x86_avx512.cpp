// AVX-512 kernels (F, BW, VL, VNNI; with AVX2, FMA, F16C): the primitives the panel and
// float algorithms are written over, and this ISA's rows of the kernel table.
// Compiled with AVX-512 flags (CMakeLists.txt); only called when detect_cpu() found them.
//
// One zmm register holds one panel lane vector: 16 rows x 4 bytes. vpdpbusd multiplies
// unsigned weight bytes by signed activation bytes, 64 products per instruction, and the
// activations' 4 bytes come broadcast from memory ({1to16}).
#include <immintrin.h>

#include <cstring>

#include "kernels/activations.h"
#include "kernels/activations_simd.h"
#include "kernels/float_gemm.h"
#include "kernels/iq_grid_kernels.h"
#include "kernels/kernel_table.h"
#include "kernels/panel_gemm.h"
#include "kernels/panel_iq4_gemm.h"
#include "kernels/panel_layout.h"

namespace herd::kernels::avx512 {
namespace {

struct Ops {
  using I = __m512i;
  using F = __m512;
  // No signed x signed byte product in AVX512-VNNI: q8_0 weights are biased by 128 to
  // unsigned and the bias is taken back through the activations' block sums.
  using Q8W = __m512i;
  static constexpr int kQ8Offset = 128;

  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static I zero() { return _mm512_setzero_si512(); }
  static I set1_8(uint8_t b) { return _mm512_set1_epi8(char(b)); }
  static I set1_32(int32_t v) { return _mm512_set1_epi32(v); }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  template <int n>
  static I srl16(I v) {
    return _mm512_srli_epi16(v, n);
  }
  template <int n>
  static I sll16(I v) {
    return _mm512_slli_epi16(v, n);
  }
  template <int n>
  static I sll32(I v) {
    return _mm512_slli_epi32(v, n);
  }
  template <int n>
  static I sra32(I v) {
    return _mm512_srai_epi32(v, n);
  }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub32(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I mul32(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I widen_u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I widen_s8(const uint8_t* p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static constexpr bool kSumsInt16 = false;
  static I dot_u8(I acc, I w, int32_t x4) {
    return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4));
  }
  static Q8W prep_q8(I v) { return _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80))); }
  static I dot_q8(I acc, Q8W w, int32_t x4) { return dot_u8(acc, w, x4); }
  static I dot_i16(I acc, I a, int32_t x2) {
    return _mm512_dpwssd_epi32(acc, a, _mm512_set1_epi32(x2));
  }
  // 16-level tables (panel_iq4_gemm.h): levels biased by 128 as prep_q8 does.
  using Q8Table = __m512i;
  static Q8Table table_q8(const int8_t* levels) {
    const __m512i t =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
    return _mm512_xor_si512(t, _mm512_set1_epi8(char(0x80)));
  }
  static Q8W lookup_q8(Q8Table table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  static __m512 load_e8m0(const uint8_t* e) {
    const __m512i wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 23));
  }

  static F zerof() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store(float* y, F v, int n) {
    if (n == 16) {
      _mm512_storeu_ps(y, v);
    } else {
      _mm512_mask_storeu_ps(y, __mmask16((1u << n) - 1), v);
    }
  }
};

struct FloatOps {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
  static __mmask16 first(int n) { return __mmask16((1u << n) - 1); }

  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_partial(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static V load(const HalfBits* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V load_partial(const HalfBits* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(n), p));
  }
  static V from_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V load(const BrainBits* p) {
    return from_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V load_partial(const BrainBits* p, int n) {
    return from_bf16(_mm256_maskz_loadu_epi16(first(n), p));
  }
};

// ---- activation quantizers: the same blocks as activations.cpp, bit for bit -------------

// roundf's halves away from zero, as the reference: truncate, then step by the fraction.
__m512i round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 fraction = _mm512_sub_ps(v, t);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i r = _mm512_cvttps_epi32(t);
  r = _mm512_mask_add_epi32(r, _mm512_cmp_ps_mask(fraction, _mm512_set1_ps(0.5f), _CMP_GE_OQ), r,
                            one);
  r = _mm512_mask_sub_epi32(r, _mm512_cmp_ps_mask(fraction, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), r,
                            one);
  return r;
}

struct Quantize {
  // One 32-value block like ggml's quantize_row_q8_0_ref; returns d as stored in f16.
  static float block32(const float* x, int8_t* qs, int32_t* sum) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127;
    const __m512 id = _mm512_set1_ps(d != 0 ? 1.0f / d : 0.0f);
    const __m512i q0 = round_half_away(_mm512_mul_ps(v0, id));
    const __m512i q1 = round_half_away(_mm512_mul_ps(v1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
    *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    return _cvtsh_ss(_cvtss_sh(d, 0));
  }
  static float abs_max256(const float* x) {
    __m512 magnitude = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i)
      magnitude = _mm512_max_ps(magnitude, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)));
    return _mm512_reduce_max_ps(magnitude);
  }
  static float first_of_magnitude256(const float* x, float m) {
    for (int i = 0; i < 16; ++i) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)),
                                               _mm512_set1_ps(m), _CMP_EQ_OQ);
      if (hit != 0) return x[16 * i + __builtin_ctz(hit)];
    }
    return m;  // not reached: m is the magnitude of one of the values
  }
  // vcvtps2dq rounds to nearest even, as ggml's nearest_int.
  static void quantize32_k(const float* x, float iscale, int8_t* qs, int32_t* sums) {
    const __m512 scale = _mm512_set1_ps(iscale);
    for (int h = 0; h < 2; ++h) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * h), scale));
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * h), _mm512_cvtepi32_epi8(q));
      sums[h] = _mm512_reduce_add_epi32(q);
    }
  }
};

// Tokens per tile: T accumulators plus the unpacked block must fit the 32 zmm registers.
constexpr int kLegacyTokens = 8;
constexpr int kKTokens = 8;

template <template <class> class U>
constexpr void (*legacy_gemm)(const GemmArgs&) =
    &PanelGemm<Ops, LegacyTile, U<Ops>, kLegacyTokens>::gemm;
template <template <class> class U>
constexpr void (*k_gemm)(const GemmArgs&) = &PanelGemm<Ops, KTile, U<Ops>, kKTokens>::gemm;

constexpr MatmulKernel kKernels[] = {
    {TensorType::Q4_0, Isa::kAvx512, kPanelRows, act_offset_row_bytes, quantize_offset<Quantize, 8>,
     q4_0_panel_bytes, pack_q4_0, nullptr, legacy_gemm<UnpackQ4_0>},
    {TensorType::Q4_1, Isa::kAvx512, kPanelRows, act_offset_row_bytes, quantize_min<Quantize>,
     q4_1_panel_bytes, pack_q4_1, nullptr, legacy_gemm<UnpackQ4_1>},
    {TensorType::Q5_0, Isa::kAvx512, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, 16>, q5_0_panel_bytes, pack_q5_0, nullptr, legacy_gemm<UnpackQ5_0>},
    {TensorType::Q5_1, Isa::kAvx512, kPanelRows, act_offset_row_bytes, quantize_min<Quantize>,
     q5_1_panel_bytes, pack_q5_1, nullptr, legacy_gemm<UnpackQ5_1>},
    {TensorType::Q8_0, Isa::kAvx512, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, Ops::kQ8Offset>, q8_0_panel_bytes, pack_q8_0, nullptr,
     legacy_gemm<UnpackQ8_0>},
    {TensorType::Q2_K, Isa::kAvx512, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q2_k_panel_bytes, pack_q2_k, nullptr, k_gemm<UnpackQ2_K>},
    {TensorType::Q3_K, Isa::kAvx512, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q3_k_panel_bytes, pack_q3_k, nullptr, k_gemm<UnpackQ3_K>},
    {TensorType::Q4_K, Isa::kAvx512, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q4_k_panel_bytes, pack_q4_k, nullptr, k_gemm<UnpackQ4_K>},
    {TensorType::Q5_K, Isa::kAvx512, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q5_k_panel_bytes, pack_q5_k, nullptr, k_gemm<UnpackQ5_K>},
    {TensorType::Q6_K, Isa::kAvx512, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q6_k_panel_bytes, pack_q6_k, nullptr, k_gemm<UnpackQ6_K>},
    {TensorType::IQ2_XXS, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq2_xxs},
    {TensorType::IQ2_XS, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq2_xs},
    {TensorType::IQ2_S, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq2_s},
    {TensorType::IQ3_XXS, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq3_xxs},
    {TensorType::IQ3_S, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq3_s},
    {TensorType::IQ1_S, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq1_s},
    {TensorType::IQ1_M, Isa::kAvx512, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx512::scratch_bytes, iq_grid::avx512::gemm_iq1_m},
    {TensorType::IQ4_NL, Isa::kAvx512, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, Ops::kQ8Offset>, q4_0_panel_bytes, pack_q4_0, nullptr,
     legacy_gemm<UnpackIQ4_NL>},
    {TensorType::MXFP4, Isa::kAvx512, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, Ops::kQ8Offset>, mxfp4_panel_bytes, pack_mxfp4, nullptr,
     legacy_gemm<UnpackMXFP4>},
    {TensorType::IQ4_XS, Isa::kAvx512, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     iq4_xs_panel_bytes, pack_iq4_xs, nullptr,
     &PanelGemm<Ops, Iq4XsTile, UnpackIQ4_XS<Ops>, kKTokens>::gemm},
    {TensorType::F32, Isa::kAvx512, 1, act_float_row_bytes, copy_act_f32, nullptr, nullptr, nullptr,
     FloatGemm<FloatOps, float, 4, 4>::gemm},
    {TensorType::F16, Isa::kAvx512, 1, act_float_row_bytes, copy_act_f32, nullptr, nullptr, nullptr,
     FloatGemm<FloatOps, HalfBits, 4, 4>::gemm},
    {TensorType::BF16, Isa::kAvx512, 1, act_float_row_bytes, round_act_bf16, nullptr, nullptr,
     nullptr, FloatGemm<FloatOps, BrainBits, 4, 4>::gemm},
};

}  // namespace

std::span<const MatmulKernel> matmul_kernels() {
  return kKernels;
}

}  // namespace herd::kernels::avx512
