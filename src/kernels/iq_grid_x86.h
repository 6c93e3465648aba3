// AVX2 decoders of the grid-based types that decode dominates (IQ2_XXS, IQ3_S: the order of
// importance in the brief), to iq_grid_simd.h's Decoded blocks, bit-identical to quant's
// decoders (matmul_test compares every ISA with the scalar reference). Included by the x86
// ISA files, which are all compiled with at least AVX2.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/iq_grid_simd.h"
#include "quant/float16.h"
#include "quant/iq_grids.h"

namespace herd::kernels::iq_grid {
namespace {

// 0xff in byte 8l + j where bit j of sign byte l (of 4, packed in `signs`) is set.
inline __m256i sign_masks(uint32_t signs) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int(signs)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
}

// kBias + magnitude, or kBias - magnitude where `negative`.
inline __m256i biased(__m256i magnitude, __m256i negative) {
  const __m256i signed_q =
      _mm256_sign_epi8(magnitude, _mm256_or_si256(negative, _mm256_set1_epi8(1)));
  return _mm256_add_epi8(signed_q, _mm256_set1_epi8(kBias));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// iq2_xxs: per sub-block 4 grid rows of 8 (scalar loads: one index byte each) and 4 sign
// bytes from their 7-bit indices.
struct DecodeIQ2_XXS {
  using Block = quant::BlockIQ2_XXS;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d) * 0.125f;
    for (int k = 0; k < 8; ++k) {
      const uint8_t* sub = b.qs + 8 * k;
      const uint32_t aux = load_u32(sub + 4);
      const __m256i grid = _mm256_set_epi64x(
          int64_t(quant::kIq2xxsGrid[sub[3]]), int64_t(quant::kIq2xxsGrid[sub[2]]),
          int64_t(quant::kIq2xxsGrid[sub[1]]), int64_t(quant::kIq2xxsGrid[sub[0]]));
      const uint32_t signs = uint32_t(quant::kIqSigns[aux & 127]) |
                             uint32_t(quant::kIqSigns[(aux >> 7) & 127]) << 8 |
                             uint32_t(quant::kIqSigns[(aux >> 14) & 127]) << 16 |
                             uint32_t(quant::kIqSigns[(aux >> 21) & 127]) << 24;
      _mm256_store_si256(reinterpret_cast<__m256i*>(out.q + 32 * k),
                         biased(grid, sign_masks(signs)));
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * (aux >> 28) + 1);
    }
  }
};

// iq3_s: per sub-block 8 grid rows of 4, their 9-bit indices built and looked up in one
// gather; the sign bytes are stored as they are.
struct DecodeIQ3_S {
  using Block = quant::BlockIQ3_S;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d);
    const __m256i shifts = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1);  // bit l of qh -> bit 8
    const __m256i bit8 = _mm256_set1_epi32(256);
    const int* grid = reinterpret_cast<const int*>(quant::kIq3sGrid);
    for (int k = 0; k < 8; ++k) {
      const __m256i low =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
      const __m256i high =
          _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(b.qh[k]), shifts), bit8);
      const __m256i magnitude = _mm256_i32gather_epi32(grid, _mm256_or_si256(low, high), 4);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out.q + 32 * k),
                         biased(magnitude, sign_masks(load_u32(b.signs + 4 * k))));
      const int s = (b.scales[k / 2] >> (4 * (k % 2))) & 15;
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * s + 1);
    }
  }
};

}  // namespace
}  // namespace herd::kernels::iq_grid
