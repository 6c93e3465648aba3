// AVX2 kernels (with FMA and F16C): the primitives the panel and float algorithms are
// written over, and this ISA's rows of the kernel table. Compiled with AVX2 flags
// (CMakeLists.txt); only called when detect_cpu() found them.
//
// A panel lane vector (16 rows x 4 bytes) is two ymm registers: rows 0-7 and rows 8-15.
// Without VNNI a 4-byte dot product is vpmaddubsw (u8 x s8 -> pairs of int16) then
// vpmaddwd by ones (-> int32). vpmaddubsw saturates at 32767: fine for unsigned weights
// below 64 (63 * 127 * 2 = 16002); q8_0's signed weights use the sign trick instead
// (|w| x sign(x, w), at most 127 * 127 * 2 = 32258), so they need no bias.
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

namespace herd::kernels::avx2 {
namespace {

struct Ops {
  struct I {
    __m256i lo, hi;  // rows 0-7, rows 8-15
  };
  struct F {
    __m256 lo, hi;
  };
  struct Q8W {
    I w, abs;
  };
  static constexpr int kQ8Offset = 0;

  template <typename Fn>
  static I each(I a, I b, Fn fn) {
    return {fn(a.lo, b.lo), fn(a.hi, b.hi)};
  }

  static I load(const void* p) {
    const __m256i* v = reinterpret_cast<const __m256i*>(p);
    return {_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1)};
  }
  static I zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static I set1_8(uint8_t b) { return {_mm256_set1_epi8(char(b)), _mm256_set1_epi8(char(b))}; }
  static I set1_32(int32_t v) { return {_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
  static I and_(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_and_si256(x, y); });
  }
  static I or_(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_or_si256(x, y); });
  }
  template <int n>
  static I srl16(I v) {
    return {_mm256_srli_epi16(v.lo, n), _mm256_srli_epi16(v.hi, n)};
  }
  template <int n>
  static I sll16(I v) {
    return {_mm256_slli_epi16(v.lo, n), _mm256_slli_epi16(v.hi, n)};
  }
  template <int n>
  static I sll32(I v) {
    return {_mm256_slli_epi32(v.lo, n), _mm256_slli_epi32(v.hi, n)};
  }
  template <int n>
  static I sra32(I v) {
    return {_mm256_srai_epi32(v.lo, n), _mm256_srai_epi32(v.hi, n)};
  }
  static I add32(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_add_epi32(x, y); });
  }
  static I sub32(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_sub_epi32(x, y); });
  }
  static I mul32(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_mullo_epi32(x, y); });
  }
  static I widen_u8(const uint8_t* p) {
    const __m128i* v = reinterpret_cast<const __m128i*>(p);
    return {_mm256_cvtepu8_epi16(_mm_loadu_si128(v)), _mm256_cvtepu8_epi16(_mm_loadu_si128(v + 1))};
  }
  static I widen_s8(const uint8_t* p) {
    const __m128i* v = reinterpret_cast<const __m128i*>(p);
    return {_mm256_cvtepi8_epi16(_mm_loadu_si128(v)), _mm256_cvtepi8_epi16(_mm_loadu_si128(v + 1))};
  }
  static __m256i dot4(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static I dot_u8(I acc, I w, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4);
    return {dot4(acc.lo, w.lo, x), dot4(acc.hi, w.hi, x)};
  }
  static constexpr bool kSumsInt16 = true;
  static I dot_u8_16(I w, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4);
    return {_mm256_maddubs_epi16(w.lo, x), _mm256_maddubs_epi16(w.hi, x)};
  }
  static I add16(I a, I b) {
    return each(a, b, [](__m256i x, __m256i y) { return _mm256_add_epi16(x, y); });
  }
  static I widen_sum16(I acc, I s) {
    const __m256i ones = _mm256_set1_epi16(1);
    return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(s.lo, ones)),
            _mm256_add_epi32(acc.hi, _mm256_madd_epi16(s.hi, ones))};
  }
  static Q8W prep_q8(I v) { return {v, {_mm256_abs_epi8(v.lo), _mm256_abs_epi8(v.hi)}}; }
  static I dot_q8(I acc, Q8W w, int32_t x4) {
    const __m256i x = _mm256_set1_epi32(x4);
    return {dot4(acc.lo, w.abs.lo, _mm256_sign_epi8(x, w.w.lo)),
            dot4(acc.hi, w.abs.hi, _mm256_sign_epi8(x, w.w.hi))};
  }
  static I dot_i16(I acc, I a, int32_t x2) {
    const __m256i x = _mm256_set1_epi32(x2);
    return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(a.lo, x)),
            _mm256_add_epi32(acc.hi, _mm256_madd_epi16(a.hi, x))};
  }
  // 16-level tables (panel_iq4_gemm.h): the levels and their magnitudes, looked up
  // together into the sign-trick pair prep_q8 makes.
  struct Q8Table {
    __m256i v, abs;
  };
  static Q8Table table_q8(const int8_t* levels) {
    const __m256i v =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
    return {v, _mm256_abs_epi8(v)};
  }
  static Q8W lookup_q8(const Q8Table& t, I idx) {
    return {{_mm256_shuffle_epi8(t.v, idx.lo), _mm256_shuffle_epi8(t.v, idx.hi)},
            {_mm256_shuffle_epi8(t.abs, idx.lo), _mm256_shuffle_epi8(t.abs, idx.hi)}};
  }
  static F load_e8m0(const uint8_t* e) {
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e)));
    const __m256i hi =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e + 8)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 23)),
            _mm256_castsi256_ps(_mm256_slli_epi32(hi, 23))};
  }

  static F zerof() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static F set1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  static F fma(F a, F b, F c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static F cvt(I v) { return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)}; }
  static F load_f16(const uint16_t* p) {
    const __m128i* v = reinterpret_cast<const __m128i*>(p);
    return {_mm256_cvtph_ps(_mm_loadu_si128(v)), _mm256_cvtph_ps(_mm_loadu_si128(v + 1))};
  }
  static void store(float* y, F v, int n) {
    if (n == 16) {
      _mm256_storeu_ps(y, v.lo);
      _mm256_storeu_ps(y + 8, v.hi);
      return;
    }
    alignas(32) float tmp[16];
    _mm256_store_ps(tmp, v.lo);
    _mm256_store_ps(tmp + 8, v.hi);
    for (int i = 0; i < n; ++i) y[i] = tmp[i];
  }
};

struct FloatOps {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Partial loads copy the n valid elements into a zeroed buffer: this runs once per row
  // tail, never in the inner loop.
  template <typename Elem>
  static V load_partial(const Elem* p, int n) {
    Elem tmp[kWidth] = {};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return load(tmp);
  }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const HalfBits* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V load(const BrainBits* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

// ---- activation quantizers: the same blocks as activations.cpp, bit for bit -------------

// roundf's halves away from zero, as the reference: truncate, then step by the fraction.
__m256i round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 fraction = _mm256_sub_ps(v, t);
  // Comparison masks are all ones (-1) where true.
  const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(fraction, _mm256_set1_ps(0.5f), _CMP_GE_OQ));
  const __m256i down =
      _mm256_castps_si256(_mm256_cmp_ps(fraction, _mm256_set1_ps(-0.5f), _CMP_LE_OQ));
  return _mm256_add_epi32(_mm256_sub_epi32(_mm256_cvttps_epi32(t), up), down);
}

__m256 magnitude(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

float max_of(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int32_t sum_of(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 32 int32 values (in -128..127) to 32 bytes in order.
void store_bytes(int8_t* dst, __m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  // packs work within 128-bit halves; the permute puts the 32-bit groups back in order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permutevar8x32_epi32(bytes, order));
}

struct Quantize {
  // One 32-value block like ggml's quantize_row_q8_0_ref; returns d as stored in f16.
  static float block32(const float* x, int8_t* qs, int32_t* sum) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      m = _mm256_max_ps(m, magnitude(v[i]));
    }
    const float d = max_of(m) / 127;
    const __m256 id = _mm256_set1_ps(d != 0 ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = round_half_away(_mm256_mul_ps(v[i], id));
    store_bytes(qs, q[0], q[1], q[2], q[3]);
    *sum = sum_of(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    return _cvtsh_ss(_cvtss_sh(d, 0));
  }
  static float abs_max256(const float* x) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) m = _mm256_max_ps(m, magnitude(_mm256_loadu_ps(x + 8 * i)));
    return max_of(m);
  }
  static float first_of_magnitude256(const float* x, float m) {
    for (int i = 0; i < 32; ++i) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(magnitude(_mm256_loadu_ps(x + 8 * i)), _mm256_set1_ps(m), _CMP_EQ_OQ));
      if (hit != 0) return x[8 * i + __builtin_ctz(unsigned(hit))];
    }
    return m;  // not reached: m is the magnitude of one of the values
  }
  // vcvtps2dq rounds to nearest even, as ggml's nearest_int.
  static void quantize32_k(const float* x, float iscale, int8_t* qs, int32_t* sums) {
    const __m256 scale = _mm256_set1_ps(iscale);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale));
      q[k] = _mm256_min_epi32(q[k], _mm256_set1_epi32(127));
    }
    store_bytes(qs, q[0], q[1], q[2], q[3]);
    sums[0] = sum_of(_mm256_add_epi32(q[0], q[1]));
    sums[1] = sum_of(_mm256_add_epi32(q[2], q[3]));
  }
};

// Tokens per tile: only 16 ymm registers, and every panel vector takes two.
constexpr int kLegacyTokens = 4;
constexpr int kKTokens = 4;

template <template <class> class U>
constexpr void (*legacy_gemm)(const GemmArgs&) =
    &PanelGemm<Ops, LegacyTile, U<Ops>, kLegacyTokens>::gemm;
template <template <class> class U>
constexpr void (*k_gemm)(const GemmArgs&) = &PanelGemm<Ops, KTile, U<Ops>, kKTokens>::gemm;

constexpr MatmulKernel kKernels[] = {
    {TensorType::Q4_0, Isa::kAvx2, kPanelRows, act_offset_row_bytes, quantize_offset<Quantize, 8>,
     q4_0_panel_bytes, pack_q4_0, nullptr, legacy_gemm<UnpackQ4_0>},
    {TensorType::Q4_1, Isa::kAvx2, kPanelRows, act_offset_row_bytes, quantize_min<Quantize>,
     q4_1_panel_bytes, pack_q4_1, nullptr, legacy_gemm<UnpackQ4_1>},
    {TensorType::Q5_0, Isa::kAvx2, kPanelRows, act_offset_row_bytes, quantize_offset<Quantize, 16>,
     q5_0_panel_bytes, pack_q5_0, nullptr, legacy_gemm<UnpackQ5_0>},
    {TensorType::Q5_1, Isa::kAvx2, kPanelRows, act_offset_row_bytes, quantize_min<Quantize>,
     q5_1_panel_bytes, pack_q5_1, nullptr, legacy_gemm<UnpackQ5_1>},
    {TensorType::Q8_0, Isa::kAvx2, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, Ops::kQ8Offset>, q8_0_panel_bytes, pack_q8_0, nullptr,
     legacy_gemm<UnpackQ8_0>},
    {TensorType::Q2_K, Isa::kAvx2, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q2_k_panel_bytes, pack_q2_k, nullptr, k_gemm<UnpackQ2_K>},
    {TensorType::Q3_K, Isa::kAvx2, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q3_k_panel_bytes, pack_q3_k, nullptr, k_gemm<UnpackQ3_K>},
    {TensorType::Q4_K, Isa::kAvx2, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q4_k_panel_bytes, pack_q4_k, nullptr, k_gemm<UnpackQ4_K>},
    {TensorType::Q5_K, Isa::kAvx2, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q5_k_panel_bytes, pack_q5_k, nullptr, k_gemm<UnpackQ5_K>},
    {TensorType::Q6_K, Isa::kAvx2, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     q6_k_panel_bytes, pack_q6_k, nullptr, k_gemm<UnpackQ6_K>},
    {TensorType::IQ2_XXS, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq2_xxs},
    {TensorType::IQ2_XS, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq2_xs},
    {TensorType::IQ2_S, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq2_s},
    {TensorType::IQ3_XXS, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq3_xxs},
    {TensorType::IQ3_S, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq3_s},
    {TensorType::IQ1_S, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq1_s},
    {TensorType::IQ1_M, Isa::kAvx2, 1, act_k_row_bytes, quantize_k<Quantize>, nullptr, nullptr,
     iq_grid::avx2::scratch_bytes, iq_grid::avx2::gemm_iq1_m},
    {TensorType::IQ4_NL, Isa::kAvx2, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, Ops::kQ8Offset>, q4_0_panel_bytes, pack_q4_0, nullptr,
     legacy_gemm<UnpackIQ4_NL>},
    {TensorType::MXFP4, Isa::kAvx2, kPanelRows, act_offset_row_bytes,
     quantize_offset<Quantize, Ops::kQ8Offset>, mxfp4_panel_bytes, pack_mxfp4, nullptr,
     legacy_gemm<UnpackMXFP4>},
    {TensorType::IQ4_XS, Isa::kAvx2, kPanelRows, act_k_row_bytes, quantize_k<Quantize>,
     iq4_xs_panel_bytes, pack_iq4_xs, nullptr,
     &PanelGemm<Ops, Iq4XsTile, UnpackIQ4_XS<Ops>, kKTokens>::gemm},
    {TensorType::F32, Isa::kAvx2, 1, act_float_row_bytes, copy_act_f32, nullptr, nullptr, nullptr,
     FloatGemm<FloatOps, float, 4, 2>::gemm},
    {TensorType::F16, Isa::kAvx2, 1, act_float_row_bytes, copy_act_f32, nullptr, nullptr, nullptr,
     FloatGemm<FloatOps, HalfBits, 4, 2>::gemm},
    {TensorType::BF16, Isa::kAvx2, 1, act_float_row_bytes, round_act_bf16, nullptr, nullptr,
     nullptr, FloatGemm<FloatOps, BrainBits, 4, 2>::gemm},
};

}  // namespace

std::span<const MatmulKernel> matmul_kernels() {
  return kKernels;
}

}  // namespace herd::kernels::avx2
