// AVX-512 kernels of the grid-based types (iq_grid_simd.h): 64 weights per vpmaddubsw, the
// sub-blocks' scales applied by vpdpwssd (VNNI) to the int16 pair sums; the decoders are the
// AVX2 ones (iq_grid_x86.h). Compiled with AVX-512 flags.
#include <immintrin.h>

#include "kernels/iq_grid_kernels.h"
#include "kernels/iq_grid_simd.h"
#include "kernels/iq_grid_x86.h"

namespace herd::kernels::iq_grid::avx512 {
namespace {

using namespace quant;

struct Dot {
  static constexpr int kMaxTokens = 8;
  template <int T>
  static void run(const Decoded* w, int64_t n_blocks, const uint8_t* act, size_t stride, float* y,
                  int64_t y_stride) {
    // For the 64 weights j: int16 lane l takes the scale of sub-block 4j + l / 8.
    __m512i pick[4];
    for (int j = 0; j < 4; ++j) {
      pick[j] = _mm512_add_epi16(_mm512_set1_epi16(short(4 * j)),
                                 _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1,
                                                  1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0));
    }
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Decoded& g = w[b];
      const __m256i scales = _mm256_load_si256(reinterpret_cast<const __m256i*>(g.scale));
      const __m512i scales512 = _mm512_castsi256_si512(scales);
      __m512i isum[T];
      for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        const __m512i q = _mm512_load_si512(g.q + 64 * j);
        const __m512i sc = _mm512_permutexvar_epi16(pick[j], scales512);
        for (int t = 0; t < T; ++t) {
          const __m512i x = _mm512_loadu_si512(act_block(act, stride, t, b).qs + 64 * j);
          isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(q, x), sc);
        }
      }
      for (int t = 0; t < T; ++t) {
        const ActQ8K& x = act_block(act, stride, t, b);
        const __m256i bias = _mm256_madd_epi16(
            scales, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsum16)));
        isum[t] =
            _mm512_sub_epi32(isum[t], _mm512_zextsi256_si512(_mm256_slli_epi32(bias, kBiasShift)));
        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(g.d * x.d), _mm512_cvtepi32_ps(isum[t]), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) y[t * y_stride] = _mm512_reduce_add_ps(acc[t]);
  }
};

template <class Decoder>
void gemm(const GemmArgs& a) {
  grid_gemm<Dot, Decoder>(a);
}

}  // namespace

size_t scratch_bytes(int64_t cols) {
  return decoded_scratch_bytes(cols);
}

void gemm_iq2_xxs(const GemmArgs& a) {
  gemm<DecodeIQ2_XXS>(a);
}
void gemm_iq2_xs(const GemmArgs& a) {
  gemm<DecodeIQ2_XS>(a);
}
void gemm_iq2_s(const GemmArgs& a) {
  gemm<DecodeIQ2_S>(a);
}
void gemm_iq3_xxs(const GemmArgs& a) {
  gemm<DecodeIQ3_XXS>(a);
}
void gemm_iq3_s(const GemmArgs& a) {
  gemm<DecodeIQ3_S>(a);
}
void gemm_iq1_s(const GemmArgs& a) {
  gemm<DecodeIQ1_S>(a);
}
void gemm_iq1_m(const GemmArgs& a) {
  gemm<DecodeIQ1_M>(a);
}

}  // namespace herd::kernels::iq_grid::avx512
