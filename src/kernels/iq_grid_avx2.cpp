// AVX2 kernels of the grid-based types (iq_grid_simd.h): the dot of biased weight bytes
// with Q8_K activations (vpmaddubsw, then vpmaddwd by the sub-blocks' scales), and the
// decoders of the types that pay for one (iq_grid_x86.h). Compiled with AVX2 flags.
#include <immintrin.h>

#include "kernels/iq_grid_kernels.h"
#include "kernels/iq_grid_simd.h"
#include "kernels/iq_grid_x86.h"

namespace herd::kernels::iq_grid::avx2 {
namespace {

using namespace quant;

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Dot {
  static constexpr int kMaxTokens = 4;  // 16 ymm: T sums + T accumulators + the block's
  template <int T>
  static void run(const Decoded* w, int64_t n_blocks, const uint8_t* act, size_t stride, float* y,
                  int64_t y_stride) {
    // Per 32 weights (sub-blocks 2j, 2j+1): int16 scale of 2j in the low lane, 2j+1 high.
    const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                            2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Decoded& g = w[b];
      const __m256i scales = _mm256_load_si256(reinterpret_cast<const __m256i*>(g.scale));
      __m256i isum[T];
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(g.q + 32 * j));
        const __m256i sc =
            _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(j)), spread);
        for (int t = 0; t < T; ++t) {
          const __m256i x = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(act_block(act, stride, t, b).qs + 32 * j));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), sc));
        }
      }
      for (int t = 0; t < T; ++t) {
        const ActQ8K& x = act_block(act, stride, t, b);
        const __m256i bias = _mm256_madd_epi16(
            scales, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsum16)));
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(bias, kBiasShift));
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(g.d * x.d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) y[t * y_stride] = hsum(acc[t]);
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

}  // namespace herd::kernels::iq_grid::avx2
