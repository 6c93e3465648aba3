// AVX-512 kernels of the grid-based types (iq_grid_simd.h): 64 weights per vpmaddubsw, the
// sub-blocks' scales applied by vpdpwssd (VNNI) to the int16 pair sums; the decoders are the
// AVX2 ones (iq_grid_x86.h). Compiled with AVX-512 flags.
#include <immintrin.h>

#include <cstring>

#include "kernels/iq_grid_kernels.h"
#include "kernels/iq_grid_simd.h"
#include "kernels/iq_grid_x86.h"

namespace herd::kernels::iq_grid::avx512 {
namespace {

using namespace quant;

// kSigned: the decoder's kSigned (iq_grid_x86.h). Every lane sums what it sums in the
// one-token kernels below, so a token's result does not depend on the call's token count.
template <bool kSigned>
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
        // Signed weights: magnitudes times the activations negated where a weight is negative.
        const __mmask64 negative = kSigned ? _mm512_movepi8_mask(q) : 0;
        const __m512i unsigned_q = kSigned ? _mm512_abs_epi8(q) : q;
        for (int t = 0; t < T; ++t) {
          __m512i x = _mm512_loadu_si512(act_block(act, stride, t, b).qs + 64 * j);
          if constexpr (kSigned) x = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
          isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(unsigned_q, x), sc);
        }
      }
      for (int t = 0; t < T; ++t) {
        const ActQ8K& x = act_block(act, stride, t, b);
        if constexpr (!kSigned) {
          const __m256i bias = _mm256_madd_epi16(
              scales, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsum16)));
          const __m256i bias9 = _mm256_mullo_epi32(bias, _mm256_set1_epi32(kIq1Bias));
          isum[t] = _mm512_sub_epi32(isum[t], _mm512_zextsi256_si512(bias9));
        }
        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(g.d * x.d), _mm512_cvtepi32_ps(isum[t]), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) y[t * y_stride] = _mm512_reduce_add_ps(acc[t]);
  }
};

template <class Decoder>
void gemm(const GemmArgs& a) {
  grid_gemm<Dot<Decoder::kSigned>, Decoder>(a);
}

// ---- one token (decode): no decoded row, signs on the activations -------------------------
// For the types whose weights are magnitudes with sign bits, a single token's product skips
// the decoded row: per 64 weights the sign bits become a mask register that negates the
// activation bytes (vpsubb under mask) and the unsigned magnitudes go straight into
// vpmaddubsw, with no bias and no correction. Dot does the same with the decoded row.

// Per 64 weights j: int16 lane l takes the scale of weights 64j + 16 * (l / 8) .. + 15,
// from the block's 16 int16 scales (one per 16 weights).
inline __m512i pick_scales(__m512i scales16, int j) {
  const __m512i lanes = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                         1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_epi16(_mm512_add_epi16(lanes, _mm512_set1_epi16(short(4 * j))),
                                  scales16);
}

// The 256 sign bits as 4 words for mask registers, moved through general registers (not
// a vector store reloaded as words, which may not forward on every core).
struct SignWords {
  uint64_t w[4];
};
inline SignWords sign_words(__m256i bits) {
  const __m128i lo = _mm256_castsi256_si128(bits), hi = _mm256_extracti128_si256(bits, 1);
  return {{uint64_t(_mm_cvtsi128_si64(lo)), uint64_t(_mm_extract_epi64(lo, 1)),
           uint64_t(_mm_cvtsi128_si64(hi)), uint64_t(_mm_extract_epi64(hi, 1))}};
}

// U: Block; d(block); scales(block) -> 16 int16 scales 2s + 1 (one per 16 weights);
// signs(block) -> the 256 sign bits; magnitudes(block, j) -> weights 64j..64j+63.
template <class U>
void one_token(const GemmArgs& a) {
  using Block = typename U::Block;
  const int64_t n_blocks = a.cols / 256;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  const ActQ8K* x = reinterpret_cast<const ActQ8K*>(a.activations);  // [n_blocks]
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r) * row_stride);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Block& blk = blocks[b];
      const SignWords bits = sign_words(U::signs(blk));
      const __m512i scales = _mm512_castsi256_si512(U::scales(blk));
      __m512i isum = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        const __m512i xj = _mm512_loadu_si512(x[b].qs + 64 * j);
        const __m512i signed_x =
            _mm512_mask_sub_epi8(xj, _cvtu64_mask64(bits.w[j]), _mm512_setzero_si512(), xj);
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(U::magnitudes(blk, j), signed_x),
                                   pick_scales(scales, j));
      }
      acc = _mm512_fmadd_ps(_mm512_set1_ps(U::d(blk) * x[b].d), _mm512_cvtepi32_ps(isum), acc);
    }
    a.y[r] = _mm512_reduce_add_ps(acc);
  }
}

struct OneTokenIQ2_XXS : UnitIQ2_XXS {
  static __m512i magnitudes(const Block& b, int j) {
    // Bytes 0-3 and 8-11 of sub-blocks 2j, 2j+1 are the 8 grid indices: one gather.
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * j));
    const __m128i packed = _mm_shuffle_epi8(
        bytes, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1, -1));
    return _mm512_i32gather_epi64(_mm256_cvtepu8_epi32(packed), kIq2xxsGrid, 8);
  }
};

struct OneTokenIQ3_S : UnitIQ3_S {
  static __m512i magnitudes(const Block& b, int j) {
    // 16 groups of 4: index = qs byte | bit (g % 8) of qh[g / 8] << 8.
    const __m512i low =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * j)));
    uint16_t qh;
    std::memcpy(&qh, b.qh + 2 * j, 2);
    const __m512i bit = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_set1_epi32(qh),
                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)),
        _mm512_set1_epi32(1));
    const __m512i high = _mm512_slli_epi32(bit, 8);
    return _mm512_i32gather_epi32(_mm512_or_si512(low, high), kIq3sGrid, 4);
  }
};

struct OneTokenIQ2_XS : UnitIQ2_XS {
  static __m512i magnitudes(const Block& b, int j) {
    // u16 per group: grid index in bits 0-8; the 8 rows in one gather.
    const __m256i words =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * j)));
    return _mm512_i32gather_epi64(_mm256_and_si256(words, _mm256_set1_epi32(511)), kIq2xsGrid, 8);
  }
};

struct OneTokenIQ2_S : UnitIQ2_S {
  static __m512i magnitudes(const Block& b, int j) {
    // Groups 8j..8j+7: index = idx byte | bits 2l..2l+1 of qh[2j + l / 4] << 8, l = g % 4.
    uint16_t qh;
    std::memcpy(&qh, b.qh + 2 * j, 2);
    const __m256i high = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(qh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    const __m256i low =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * j)));
    return _mm512_i32gather_epi64(_mm256_or_si256(low, _mm256_slli_epi32(high, 8)), kIq2sGrid, 8);
  }
};

struct OneTokenIQ3_XXS : UnitIQ3_XXS {
  static __m512i magnitudes(const Block& b, int j) {
    const __m512i index =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * j)));
    return _mm512_i32gather_epi32(index, kIq3xxsGrid, 4);
  }
};

// ---- IQ1 one token: weights 8 * grid + delta biased by 9 to 0..18 -------------------------
// q = 8g + delta (g, delta: -1, 0, +1 and +-1) is below zero for vpmaddubsw, but q + 9 =
// 8 (g + 1) + (delta + 1) is not, and the 9 comes back through the block sums as in the
// decoded path: sum q x = sum (q + 9) x - 9 sum x.
// U: Block; d(block); scales(block) -> 16 int16 scales; weights(block, j) -> q + 9 of
// weights 64j..64j+63.
template <class U>
void one_token_iq1(const GemmArgs& a) {
  using Block = typename U::Block;
  const int64_t n_blocks = a.cols / 256;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  const ActQ8K* x = reinterpret_cast<const ActQ8K*>(a.activations);  // [n_blocks]
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r) * row_stride);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Block& blk = blocks[b];
      const __m256i scales = U::scales(blk);
      const __m512i scales512 = _mm512_castsi256_si512(scales);
      __m512i isum = _mm512_setzero_si512();
      for (int j = 0; j < 4; ++j) {
        const __m512i xj = _mm512_loadu_si512(x[b].qs + 64 * j);
        isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(U::weights(blk, j), xj),
                                   pick_scales(scales512, j));
      }
      const __m256i bias = _mm256_madd_epi16(
          scales, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].bsum16)));
      const __m256i bias9 = _mm256_mullo_epi32(bias, _mm256_set1_epi32(kIq1Bias));
      isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(bias9));
      acc = _mm512_fmadd_ps(_mm512_set1_ps(U::d(blk) * x[b].d), _mm512_cvtepi32_ps(isum), acc);
    }
    a.y[r] = _mm512_reduce_add_ps(acc);
  }
}

// 8 (g + 1) + delta_plus_1 for the grid bytes g of 64 weights.
inline __m512i iq1_weights(__m512i grid, __m512i delta_plus_1) {
  const __m512i g1 = _mm512_add_epi8(grid, _mm512_set1_epi8(1));   // 0, 1, 2
  return _mm512_add_epi8(_mm512_slli_epi16(g1, 3), delta_plus_1);  // no carry: g1 << 3 <= 16
}

struct OneTokenIQ1_S : UnitIQ1_S {
  static __m512i weights(const Block& b, int j) {
    // Groups 8j..8j+7 (sub-blocks 2j, 2j+1): index = qs byte | bits 3l..3l+2 of the
    // sub-block's qh << 8, l = g % 4; one gather for the 8 rows.
    const int h0 = b.qh[2 * j], h1 = b.qh[2 * j + 1];
    const __m256i h = _mm256_set_m128i(_mm_set1_epi32(h1), _mm_set1_epi32(h0));
    const __m256i high = _mm256_and_si256(
        _mm256_srlv_epi32(h, _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9)), _mm256_set1_epi32(7));
    const __m256i low =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * j)));
    const __m512i grid =
        _mm512_i32gather_epi64(_mm256_or_si256(low, _mm256_slli_epi32(high, 8)), kIq1sGrid, 8);
    const char d0 = h0 & 0x8000 ? 0 : 2, d1 = h1 & 0x8000 ? 0 : 2;
    const __m512i delta =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(d0)), _mm256_set1_epi8(d1), 1);
    return iq1_weights(grid, delta);
  }
};

struct OneTokenIQ1_M {
  using Block = BlockIQ1_M;
  static float d(const Block& b) {
    const uint16_t d_bits =
        uint16_t((load_u16(b.scales) >> 12) | (load_u16(b.scales + 2) >> 8 & 0x00f0) |
                 (load_u16(b.scales + 4) >> 4 & 0x0f00) | (load_u16(b.scales + 6) & 0xf000));
    return half_to_float(d_bits) * 0.125f;
  }
  static __m256i scales(const Block& b) {
    // u16 m holds the 3-bit scales of weights 64m + 16j (j < 4) in bits 3j..3j+2.
    const __m256i words =
        _mm256_cvtepu16_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales)));
    const __m256i per16 = _mm256_permutexvar_epi16(
        _mm256_setr_epi16(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12), words);
    const __m256i s = _mm256_and_si256(
        _mm256_srlv_epi16(per16, _mm256_setr_epi16(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)),
        _mm256_set1_epi16(7));
    return _mm256_or_si256(_mm256_slli_epi16(s, 1), _mm256_set1_epi16(1));
  }
  static __m512i weights(const Block& b, int j) {
    // Groups 8j..8j+7: qh bytes 4j..4j+3, group 2h in bits 0-3, 2h + 1 in bits 4-7: the
    // nibble of group g is bits 4g..4g+3 of their u32 (3 high index bits, then the delta).
    const __m256i nibble =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(load_u32(b.qh + 4 * j))),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(15));
    const __m256i low =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * j)));
    const __m256i index =
        _mm256_or_si256(low, _mm256_slli_epi32(_mm256_and_si256(nibble, _mm256_set1_epi32(7)), 8));
    const __m512i grid = _mm512_i32gather_epi64(index, kIq1sGrid, 8);
    const __mmask8 negative = _mm256_test_epi32_mask(nibble, _mm256_set1_epi32(8));
    const __m512i delta_plus_1 =
        _mm512_mask_blend_epi64(negative, _mm512_set1_epi8(2), _mm512_setzero_si512());
    return iq1_weights(grid, delta_plus_1);
  }
};

}  // namespace

size_t scratch_bytes(int64_t cols) {
  return decoded_scratch_bytes(cols);
}

void gemm_iq2_xxs(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<OneTokenIQ2_XXS>(a);
  gemm<DecodeIQ2_XXS>(a);
}
void gemm_iq2_xs(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<OneTokenIQ2_XS>(a);
  gemm<DecodeIQ2_XS>(a);
}
void gemm_iq2_s(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<OneTokenIQ2_S>(a);
  gemm<DecodeIQ2_S>(a);
}
void gemm_iq3_xxs(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<OneTokenIQ3_XXS>(a);
  gemm<DecodeIQ3_XXS>(a);
}
void gemm_iq3_s(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token<OneTokenIQ3_S>(a);
  gemm<DecodeIQ3_S>(a);
}
void gemm_iq1_s(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token_iq1<OneTokenIQ1_S>(a);
  gemm<DecodeIQ1_S>(a);
}
void gemm_iq1_m(const GemmArgs& a) {
  if (a.n_tokens == 1) return one_token_iq1<OneTokenIQ1_M>(a);
  gemm<DecodeIQ1_M>(a);
}

}  // namespace herd::kernels::iq_grid::avx512
