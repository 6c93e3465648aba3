// AVX2 kernels of the grid-based types (iq_grid_simd.h): the dot of decoded weight bytes
// with Q8_K activations (vpmaddubsw, then vpmaddwd by the sub-blocks' scales), summed lane
// for lane as the one-token kernels below sum them, and the decoders of iq_grid_x86.h.
// Compiled with AVX2 flags.
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

// kSigned: the decoder's kSigned (iq_grid_x86.h).
template <bool kSigned>
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
        // Signed weights: magnitudes times the activations negated where a weight is negative.
        const __m256i unsigned_q = kSigned ? _mm256_abs_epi8(q) : q;
        for (int t = 0; t < T; ++t) {
          __m256i x = load256(act_block(act, stride, t, b).qs + 32 * j);
          if constexpr (kSigned) x = _mm256_sign_epi8(x, q);
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned_q, x), sc));
        }
      }
      for (int t = 0; t < T; ++t) {
        const ActQ8K& x = act_block(act, stride, t, b);
        if constexpr (!kSigned) {
          const __m256i bias = _mm256_madd_epi16(scales, load256(x.bsum16));
          isum[t] =
              _mm256_sub_epi32(isum[t], _mm256_mullo_epi32(bias, _mm256_set1_epi32(kIq1Bias)));
        }
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(g.d * x.d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) y[t * y_stride] = hsum(acc[t]);
  }
};

template <class Decoder>
void gemm(const GemmArgs& a) {
  grid_gemm<Dot<Decoder::kSigned>, Decoder>(a);
}

// ---- one token (decode): the units of iq_grid_x86.h, no decoded row ----------------------

// The int16 scales of sub-blocks 2k (low lane) and 2k + 1 (high lane) from 16 int16 scales.
inline __m256i spread_scales(__m256i scales, int k) {
  const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                          2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  return _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(scales, _mm256_set1_epi32(k)), spread);
}

// Sign-bit types: the signs negate the activation bytes (vpsignb).
template <class U>
void one_token(const GemmArgs& a) {
  using Block = typename U::Block;
  const int64_t n_blocks = a.cols / 256;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  const ActQ8K* x = reinterpret_cast<const ActQ8K*>(a.activations);  // [n_blocks]
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r) * row_stride);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Block& blk = blocks[b];
      const __m256i signs = U::signs(blk);
      const __m256i scales = U::scales(blk);
      __m256i isum = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const __m256i xk = load256(x[b].qs + 32 * k);
        const __m256i flip = _mm256_or_si256(sign_masks(signs, k), _mm256_set1_epi8(1));
        const __m256i products =
            _mm256_maddubs_epi16(U::magnitudes32(blk, k), _mm256_sign_epi8(xk, flip));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(products, spread_scales(scales, k)));
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(U::d(blk) * x[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    a.y[r] = hsum(acc);
  }
}

// IQ1: unsigned weights q + 9, the bias back through the block sums.
template <class U>
void one_token_iq1(const GemmArgs& a) {
  using Block = typename U::Block;
  const int64_t n_blocks = a.cols / 256;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  const ActQ8K* x = reinterpret_cast<const ActQ8K*>(a.activations);  // [n_blocks]
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r) * row_stride);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Block& blk = blocks[b];
      const __m256i scales = U::scales(blk);
      __m256i isum = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        const __m256i products =
            _mm256_maddubs_epi16(U::weights32(blk, k), load256(x[b].qs + 32 * k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(products, spread_scales(scales, k)));
      }
      const __m256i bias = _mm256_madd_epi16(scales, load256(x[b].bsum16));
      isum = _mm256_sub_epi32(isum, _mm256_mullo_epi32(bias, _mm256_set1_epi32(kIq1Bias)));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(U::d(blk) * x[b].d), _mm256_cvtepi32_ps(isum), acc);
    }
    a.y[r] = hsum(acc);
  }
}

}  // namespace

size_t scratch_bytes(int64_t cols) {
  return decoded_scratch_bytes(cols);
}

void gemm_iq2_xxs(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<UnitIQ2_XXS>(a);
  gemm<DecodeIQ2_XXS>(a);
}
void gemm_iq2_xs(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<UnitIQ2_XS>(a);
  gemm<DecodeIQ2_XS>(a);
}
void gemm_iq2_s(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<UnitIQ2_S>(a);
  gemm<DecodeIQ2_S>(a);
}
void gemm_iq3_xxs(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<UnitIQ3_XXS>(a);
  gemm<DecodeIQ3_XXS>(a);
}
void gemm_iq3_s(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<UnitIQ3_S>(a);
  gemm<DecodeIQ3_S>(a);
}
void gemm_iq1_s(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token_iq1<UnitIQ1_S>(a);
  gemm<DecodeIQ1_S>(a);
}
void gemm_iq1_m(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token_iq1<UnitIQ1_M>(a);
  gemm<DecodeIQ1_M>(a);
}

}  // namespace herd::kernels::iq_grid::avx2
