// AVX2 decoders of the grid-based types to iq_grid_simd.h's Decoded blocks, bit-identical
// to quant's decoders (matmul_test compares every ISA with the scalar reference). Decoding,
// not the dot, is what a grid type's product costs (perf: ~85% of a one-token iq2_xxs
// product), so each type has one: grid rows by scalar loads (4 per 32 weights; gathers
// measured no faster on Zen 4) or one gather (IQ3's 4-byte rows), sign bits expanded to byte
// masks in vectors, the implied eighth sign bit as a parity in vectors, not a table.
// Included by the x86 ISA files, which are all compiled with at least AVX2.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/iq_grid_simd.h"
#include "quant/iq_grids.h"

namespace herd::kernels::iq_grid {
namespace {

// F16C's conversion: the same value as quant's fp16_to_fp32, without its branches.
inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

inline void store256(void* p, __m256i v) {
  _mm256_store_si256(static_cast<__m256i*>(p), v);
}

// Four grid rows of 8 (one sub-block's magnitudes, or IQ1's -1/0/+1 bytes) in one vector.
inline __m256i grid4(const uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_set_epi64x(int64_t(grid[i3]), int64_t(grid[i2]), int64_t(grid[i1]),
                           int64_t(grid[i0]));
}

// The block's sign bits: bit i of `signs` (256 bits, byte g = the sign byte of weights
// 8g..8g+7) set where weight i is negative. Sub-block k's 32 bits, one byte per weight:
// 0xff where negative.
inline __m256i sign_masks(__m256i signs, int k) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i lane = _mm256_permutevar8x32_epi32(signs, _mm256_set1_epi32(k));
  const __m256i bytes = _mm256_shuffle_epi8(lane, spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
}

// Bytes of 7-bit sign indices (bit 7 clear) completed to sign bytes: bit 7 makes the number
// of set bits even (what kIqSigns tabulates), computed for 32 groups at once.
inline __m256i complete_signs(__m256i index_bytes) {
  // Parity of each byte ends in its bit 0: the shifts move bits down within the byte's low
  // nibble only, so neighbouring bytes never mix into bit 0.
  __m256i p = _mm256_xor_si256(index_bytes, _mm256_srli_epi32(index_bytes, 4));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
  const __m256i parity = _mm256_and_si256(p, _mm256_set1_epi8(1));
  return _mm256_or_si256(index_bytes, _mm256_slli_epi32(parity, 7));
}

// IQ2_XXS / IQ3_XXS: the u32 of each sub-block holds 4 sign indices (bits 7l..7l+6) and the
// scale (bits 28-31); returns the block's sign bits (as sign_masks wants) from 8 such words.
inline __m256i signs_of_words(__m256i words) {
  __m256i b = _mm256_and_si256(words, _mm256_set1_epi32(0x7f));
  b = _mm256_or_si256(b, _mm256_and_si256(_mm256_slli_epi32(words, 1), _mm256_set1_epi32(0x7f00)));
  b = _mm256_or_si256(b,
                      _mm256_and_si256(_mm256_slli_epi32(words, 2), _mm256_set1_epi32(0x7f0000)));
  b = _mm256_or_si256(b,
                      _mm256_and_si256(_mm256_slli_epi32(words, 3), _mm256_set1_epi32(0x7f000000)));
  return complete_signs(b);
}

// The scales 2s + 1 of 8 words with s in bits 28-31, stored as int16 pairs (both halves
// of sub-block k share it).
inline void store_word_scales(__m256i words, int16_t* scale) {
  const __m256i s =
      _mm256_add_epi32(_mm256_slli_epi32(_mm256_srli_epi32(words, 28), 1), _mm256_set1_epi32(1));
  store256(scale, _mm256_or_si256(s, _mm256_slli_epi32(s, 16)));
}

// IQ2_XS / IQ2_S: scales[k] holds s of the two halves of sub-block k in its nibbles.
inline void store_nibble_scales(const uint8_t* scales, int16_t* scale) {
  for (int k = 0; k < 8; ++k) {
    scale[2 * k] = int16_t(2 * (scales[k] & 15) + 1);
    scale[2 * k + 1] = int16_t(2 * (scales[k] >> 4) + 1);
  }
}

// The magnitude, negated where `negative`.
inline __m256i signed_weights(__m256i magnitude, __m256i negative) {
  return _mm256_sign_epi8(magnitude, _mm256_or_si256(negative, _mm256_set1_epi8(1)));
}

// IQ1: no signs; weights q = 8g + delta (grid bytes g: -1, 0, +1; delta +-1 per byte in
// `delta`) are stored as q + 9 = 8 (g + 1) + (delta + 1), 0..18, unsigned for vpmaddubsw
// (the 9 comes back through the block sums: sum q x = sum (q + 9) x - 9 sum x).
inline constexpr int kIq1Bias = 9;
inline __m256i biased_iq1(__m256i grid, __m256i delta) {
  return _mm256_add_epi8(_mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta),
                         _mm256_set1_epi8(kIq1Bias));
}

// ---- the decoders ----------------------------------------------------------------------------
// A Decoded block's q holds the weights as the one-token kernels below feed them to
// vpmaddubsw, so the several-token dot (the ISA files' Dot) sums every SIMD lane exactly as
// the one-token kernels do and a token's result does not depend on how many tokens share the
// call (speculative decoding verifies k + 1 tokens at once and must match one at a time):
//   kSigned (sign-bit types): the signed weights; the dot multiplies their magnitudes by the
//     activations negated where a weight is negative, as the one-token kernels do;
//   IQ1: the weights plus kIq1Bias, the bias taken back through the block sums.
// (NEON keeps iq_grid_simd.h's q + kBias: its one-token product is its dot of one token.)

struct DecodeIQ2_XXS {
  using Block = quant::BlockIQ2_XXS;
  static constexpr bool kSigned = true;
  static void decode(const Block& b, Decoded& out) {
    out.d = half_to_float(b.d) * 0.125f;
    // Sub-block k = 8 bytes: 4 grid indices, then its u32 of signs and scale.
    const __m256i odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    const __m256i words =
        _mm256_blend_epi32(_mm256_permutevar8x32_epi32(load256(b.qs), odd),
                           _mm256_permutevar8x32_epi32(load256(b.qs + 32), odd), 0xf0);
    const __m256i signs = signs_of_words(words);
    store_word_scales(words, out.scale);
    const uint64_t* grid = quant::kIq2xxsGrid;
    for (int k = 0; k < 8; ++k) {
      const uint8_t* idx = b.qs + 8 * k;
      store256(out.q + 32 * k,
               signed_weights(grid4(grid, idx[0], idx[1], idx[2], idx[3]), sign_masks(signs, k)));
    }
  }
};

struct DecodeIQ2_XS {
  using Block = quant::BlockIQ2_XS;
  static constexpr bool kSigned = true;
  static void decode(const Block& b, Decoded& out) {
    out.d = half_to_float(b.d) * 0.125f;
    // u16 per group: grid index in bits 0-8, sign index in 9-15.
    const __m256i s0 = _mm256_srli_epi16(load256(b.qs), 9);
    const __m256i s1 = _mm256_srli_epi16(load256(b.qs + 32), 9);
    const __m256i index_bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(s0, s1), 0xd8);
    const __m256i signs = complete_signs(index_bytes);
    store_nibble_scales(b.scales, out.scale);
    const uint64_t* grid = quant::kIq2xsGrid;
    for (int k = 0; k < 8; ++k) {
      const uint8_t* q = b.qs + 8 * k;
      store256(out.q + 32 * k, signed_weights(grid4(grid, load_u16(q) & 511, load_u16(q + 2) & 511,
                                                    load_u16(q + 4) & 511, load_u16(q + 6) & 511),
                                              sign_masks(signs, k)));
    }
  }
};

struct DecodeIQ2_S {
  using Block = quant::BlockIQ2_S;
  static constexpr bool kSigned = true;
  static void decode(const Block& b, Decoded& out) {
    out.d = half_to_float(b.d) * 0.125f;
    const __m256i signs = load256(b.qs + 32);  // one sign byte per group, as stored
    store_nibble_scales(b.scales, out.scale);
    const uint64_t* grid = quant::kIq2sGrid;
    for (int k = 0; k < 8; ++k) {
      const uint8_t* idx = b.qs + 4 * k;
      const int h = b.qh[k];
      store256(out.q + 32 * k,
               signed_weights(grid4(grid, idx[0] | (h & 3) << 8, idx[1] | (h & 12) << 6,
                                    idx[2] | (h & 48) << 4, idx[3] | (h & 192) << 2),
                              sign_masks(signs, k)));
    }
  }
};

// IQ3: 8 grid rows of 4 per sub-block, looked up in one gather.
inline __m256i gather_grid4x8(const uint32_t* grid, __m256i index) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(grid), index, 4);
}

struct DecodeIQ3_XXS {
  using Block = quant::BlockIQ3_XXS;
  static constexpr bool kSigned = true;
  static void decode(const Block& b, Decoded& out) {
    out.d = half_to_float(b.d) * 0.25f;
    const __m256i words = load256(b.qs + 64);  // u32 of signs and scale per sub-block
    const __m256i signs = signs_of_words(words);
    store_word_scales(words, out.scale);
    for (int k = 0; k < 8; ++k) {
      const __m256i index =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
      store256(out.q + 32 * k,
               signed_weights(gather_grid4x8(quant::kIq3xxsGrid, index), sign_masks(signs, k)));
    }
  }
};

struct DecodeIQ3_S {
  using Block = quant::BlockIQ3_S;
  static constexpr bool kSigned = true;
  static void decode(const Block& b, Decoded& out) {
    out.d = half_to_float(b.d);
    const __m256i shifts = _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1);  // bit l of qh -> bit 8
    const __m256i bit8 = _mm256_set1_epi32(256);
    const __m256i signs = load256(b.signs);  // one sign byte per 8 weights, as stored
    for (int k = 0; k < 8; ++k) {
      const __m256i low =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
      const __m256i high =
          _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(b.qh[k]), shifts), bit8);
      store256(out.q + 32 * k,
               signed_weights(gather_grid4x8(quant::kIq3sGrid, _mm256_or_si256(low, high)),
                              sign_masks(signs, k)));
      const int s = (b.scales[k / 2] >> (4 * (k % 2))) & 15;
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * s + 1);
    }
  }
};

struct DecodeIQ1_S {
  using Block = quant::BlockIQ1_S;
  static constexpr bool kSigned = false;
  static void decode(const Block& b, Decoded& out) {
    out.d = half_to_float(b.d) * 0.125f;
    const uint64_t* grid = quant::kIq1sGrid;
    for (int k = 0; k < 8; ++k) {
      const int h = b.qh[k];
      const uint8_t* idx = b.qs + 4 * k;
      const __m256i g = grid4(grid, idx[0] | (h & 7) << 8, idx[1] | (h & 0x38) << 5,
                              idx[2] | (h & 0x1c0) << 2, idx[3] | (h & 0xe00) >> 1);
      store256(out.q + 32 * k, biased_iq1(g, _mm256_set1_epi8(h & 0x8000 ? -1 : 1)));
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * ((h >> 12) & 7) + 1);
    }
  }
};

struct DecodeIQ1_M {
  using Block = quant::BlockIQ1_M;
  static constexpr bool kSigned = false;
  static void decode(const Block& b, Decoded& out) {
    uint16_t sc[4];
    for (int m = 0; m < 4; ++m) sc[m] = load_u16(b.scales + 2 * m);
    const uint16_t d_bits =
        uint16_t((sc[0] >> 12) | (sc[1] >> 8 & 0x00f0) | (sc[2] >> 4 & 0x0f00) | (sc[3] & 0xf000));
    out.d = half_to_float(d_bits) * 0.125f;
    for (int j = 0; j < 16; ++j) {
      out.scale[j] = int16_t(2 * ((sc[j / 4] >> (3 * (j % 4))) & 7) + 1);
    }
    const uint64_t* grid = quant::kIq1sGrid;
    auto delta = [](int h) {
      return int64_t(h & 8 ? 0xffffffffffffffffull : 0x0101010101010101ull);
    };
    for (int k = 0; k < 8; ++k) {
      const int h0 = b.qh[2 * k], h1 = b.qh[2 * k + 1];
      const uint8_t* idx = b.qs + 4 * k;
      const __m256i g = grid4(grid, idx[0] | (h0 & 7) << 8, idx[1] | (h0 & 0x70) << 4,
                              idx[2] | (h1 & 7) << 8, idx[3] | (h1 & 0x70) << 4);
      const __m256i d = _mm256_set_epi64x(delta(h1 >> 4), delta(h1), delta(h0 >> 4), delta(h0));
      store256(out.q + 32 * k, biased_iq1(g, d));
    }
  }
};

// ---- one token: the per-type parts of the one-token kernels ---------------------------------
// For a single token the ISA files skip the decoded row: the sign bits are applied to the
// activations and unsigned magnitudes go straight into vpmaddubsw (no bias, no correction).
// A unit gives, per block: d, the 16 int16 scales (one per 16 weights), the 256 sign bits,
// and the magnitudes of 32 weights (magnitudes32; the AVX-512 file adds 64-weight ones).

// Scales 2s + 1 from u32 words with s in bits 28-31, as int16 pairs (both halves of a
// 32-weight sub-block share it).
inline __m256i word_scales(__m256i words) {
  const __m256i s =
      _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(words, 28), 1), _mm256_set1_epi32(1));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}

// Scales 2s + 1 of IQ2_XS / IQ2_S: byte k holds s of weights 32k..+15 (lo), +16..+31 (hi).
inline __m256i nibble_scales(const uint8_t* bytes) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  const __m128i lo = _mm_and_si128(v, _mm_set1_epi16(15));
  const __m128i hi = _mm_srli_epi16(v, 4);
  const __m256i s = _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi));
  return _mm256_or_si256(_mm256_slli_epi16(s, 1), _mm256_set1_epi16(1));
}

struct UnitIQ2_XXS {
  using Block = quant::BlockIQ2_XXS;
  static __m256i words(const Block& b) {
    const __m256i odd = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
    return _mm256_blend_epi32(_mm256_permutevar8x32_epi32(load256(b.qs), odd),
                              _mm256_permutevar8x32_epi32(load256(b.qs + 32), odd), 0xf0);
  }
  static float d(const Block& b) { return half_to_float(b.d) * 0.125f; }
  static __m256i scales(const Block& b) { return word_scales(words(b)); }
  static __m256i signs(const Block& b) { return signs_of_words(words(b)); }
  static __m256i magnitudes32(const Block& b, int k) {
    const uint8_t* idx = b.qs + 8 * k;
    return grid4(quant::kIq2xxsGrid, idx[0], idx[1], idx[2], idx[3]);
  }
};

struct UnitIQ2_XS {
  using Block = quant::BlockIQ2_XS;
  static float d(const Block& b) { return half_to_float(b.d) * 0.125f; }
  static __m256i scales(const Block& b) { return nibble_scales(b.scales); }
  static __m256i signs(const Block& b) {
    const __m256i s0 = _mm256_srli_epi16(load256(b.qs), 9);
    const __m256i s1 = _mm256_srli_epi16(load256(b.qs + 32), 9);
    return complete_signs(_mm256_permute4x64_epi64(_mm256_packus_epi16(s0, s1), 0xd8));
  }
  static __m256i magnitudes32(const Block& b, int k) {
    const uint8_t* q = b.qs + 8 * k;  // u16 per group: grid index in bits 0-8
    return grid4(quant::kIq2xsGrid, load_u16(q) & 511, load_u16(q + 2) & 511, load_u16(q + 4) & 511,
                 load_u16(q + 6) & 511);
  }
};

struct UnitIQ2_S {
  using Block = quant::BlockIQ2_S;
  static float d(const Block& b) { return half_to_float(b.d) * 0.125f; }
  static __m256i scales(const Block& b) { return nibble_scales(b.scales); }
  static __m256i signs(const Block& b) { return load256(b.qs + 32); }
  static __m256i magnitudes32(const Block& b, int k) {
    const uint8_t* idx = b.qs + 4 * k;
    const int h = b.qh[k];
    return grid4(quant::kIq2sGrid, idx[0] | (h & 3) << 8, idx[1] | (h & 12) << 6,
                 idx[2] | (h & 48) << 4, idx[3] | (h & 192) << 2);
  }
};

struct UnitIQ3_XXS {
  using Block = quant::BlockIQ3_XXS;
  static __m256i words(const Block& b) { return load256(b.qs + 64); }
  static float d(const Block& b) { return half_to_float(b.d) * 0.25f; }
  static __m256i scales(const Block& b) { return word_scales(words(b)); }
  static __m256i signs(const Block& b) { return signs_of_words(words(b)); }
  static __m256i magnitudes32(const Block& b, int k) {
    const __m256i index =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
    return gather_grid4x8(quant::kIq3xxsGrid, index);
  }
};

struct UnitIQ3_S {
  using Block = quant::BlockIQ3_S;
  static float d(const Block& b) { return half_to_float(b.d); }
  static __m256i scales(const Block& b) {
    uint32_t packed;
    std::memcpy(&packed, b.scales, 4);
    const __m256i nibbles =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(packed)),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(15));
    const __m256i s = _mm256_or_si256(_mm256_slli_epi32(nibbles, 1), _mm256_set1_epi32(1));
    return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
  }
  static __m256i signs(const Block& b) { return load256(b.signs); }
  static __m256i magnitudes32(const Block& b, int k) {
    const __m256i low =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k)));
    const __m256i high = _mm256_and_si256(
        _mm256_sllv_epi32(_mm256_set1_epi32(b.qh[k]), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1)),
        _mm256_set1_epi32(256));
    return gather_grid4x8(quant::kIq3sGrid, _mm256_or_si256(low, high));
  }
};

// IQ1: the weights q + kIq1Bias, as the decoders write them.
struct UnitIQ1_S {
  using Block = quant::BlockIQ1_S;
  static float d(const Block& b) { return half_to_float(b.d) * 0.125f; }
  static __m256i scales(const Block& b) {
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
    const __m128i s =
        _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1),
                     _mm_set1_epi16(1));
    return _mm256_set_m128i(_mm_unpackhi_epi16(s, s), _mm_unpacklo_epi16(s, s));
  }
  static __m256i grid32(const Block& b, int k) {
    // Group l: index = qs byte | bits 3l..3l+2 of qh[k] << 8; the 4 rows in one gather, as
    // in the AVX-512 IQ1 kernels (where that measured faster than scalar index arithmetic).
    const __m128i high = _mm_and_si128(
        _mm_srlv_epi32(_mm_set1_epi32(b.qh[k]), _mm_setr_epi32(0, 3, 6, 9)), _mm_set1_epi32(7));
    const __m128i low = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(int(load_u32(b.qs + 4 * k))));
    return _mm256_i32gather_epi64(reinterpret_cast<const long long*>(quant::kIq1sGrid),
                                  _mm_or_si128(low, _mm_slli_epi32(high, 8)), 8);
  }
  static __m256i weights32(const Block& b, int k) {
    const __m256i g1 = _mm256_add_epi8(grid32(b, k), _mm256_set1_epi8(1));  // 0, 1, 2
    const char delta_plus_1 = b.qh[k] & 0x8000 ? 0 : 2;
    return _mm256_add_epi8(_mm256_slli_epi16(g1, 3), _mm256_set1_epi8(delta_plus_1));
  }
};

struct UnitIQ1_M {
  using Block = quant::BlockIQ1_M;
  static float d(const Block& b) {
    const uint16_t d_bits =
        uint16_t((load_u16(b.scales) >> 12) | (load_u16(b.scales + 2) >> 8 & 0x00f0) |
                 (load_u16(b.scales + 4) >> 4 & 0x0f00) | (load_u16(b.scales + 6) & 0xf000));
    return half_to_float(d_bits) * 0.125f;
  }
  static __m256i scales(const Block& b) {
    // u16 m: bits 3j..3j+2 = s of weights 64m + 16j (j < 4).
    alignas(32) int16_t s[16];
    for (int i = 0; i < 16; ++i) {
      s[i] = int16_t(2 * ((load_u16(b.scales + 2 * (i / 4)) >> (3 * (i % 4))) & 7) + 1);
    }
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(s));
  }
  static __m256i weights32(const Block& b, int k) {
    // Groups 4k..4k+3: the nibble of group l is bits 4l..4l+3 of qh bytes 2k, 2k+1 (3 high
    // index bits, then the delta bit).
    const __m128i nibble = _mm_and_si128(
        _mm_srlv_epi32(_mm_set1_epi32(load_u16(b.qh + 2 * k)), _mm_setr_epi32(0, 4, 8, 12)),
        _mm_set1_epi32(15));
    const __m128i low = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(int(load_u32(b.qs + 4 * k))));
    const __m128i index =
        _mm_or_si128(low, _mm_slli_epi32(_mm_and_si128(nibble, _mm_set1_epi32(7)), 8));
    const __m256i grid =
        _mm256_i32gather_epi64(reinterpret_cast<const long long*>(quant::kIq1sGrid), index, 8);
    const __m128i negative =
        _mm_cmpeq_epi32(_mm_and_si128(nibble, _mm_set1_epi32(8)), _mm_set1_epi32(8));
    const __m256i delta_plus_1 =
        _mm256_andnot_si256(_mm256_cvtepi32_epi64(negative), _mm256_set1_epi8(2));
    const __m256i g1 = _mm256_add_epi8(grid, _mm256_set1_epi8(1));  // 0, 1, 2
    return _mm256_add_epi8(_mm256_slli_epi16(g1, 3), delta_plus_1);
  }
};

}  // namespace
}  // namespace herd::kernels::iq_grid
