// The grid-based low-bit GGUF types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M):
// block layouts, byte for byte as in GGUF files (ggml's ggml-common.h), their decoding to
// integers and their dequantization. Every one is a 256-element super-block of 8 sub-blocks
// of 32; groups of 8 (IQ3: 4) weights are an index into a codebook of magnitudes
// (iq_grids.h) plus signs. Multi-byte fields are little-endian; f16 fields hold raw bits.
//
// No quantizers: the reference ones need an importance matrix and grid searches (files of
// these types come from llama-quantize / ik_llama.cpp); herd reads them.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace herd::quant {

// iq2_xxs, 66 bytes, 2.0625 bits/weight:
//   x[i] = d * (2s + 1) / 8 * grid[g][i % 8] * sign,  g = the group of 8 of element i
//   0      2                                   66
//   | d f16 | qs[64]: per sub-block k, 8 bytes |
// Sub-block k (bytes 8k..8k+7): bytes 0-3 are the grid indices (kIq2xxsGrid) of its 4 groups;
// bytes 4-7 are a u32 whose bits 7l..7l+6 are the sign index (kIqSigns) of group l and whose
// bits 28-31 are the 4-bit scale s.
struct BlockIQ2_XXS {
  uint16_t d;
  uint8_t qs[64];
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

// iq2_xs, 74 bytes, 2.3125 bits/weight; scales per 16 weights:
//   x[i] = d * (2s + 1) / 8 * grid[g][i % 8] * sign
//   0      2                       66           74
//   | d f16 | qs[32] u16 per group | scales[8] |
// qs[g]: bits 0-8 grid index (kIq2xsGrid), bits 9-15 sign index (kIqSigns).
// scales[k]: s of weights 32k..32k+15 in the lo nibble, of 32k+16..32k+31 in the hi nibble.
struct BlockIQ2_XS {
  uint16_t d;
  uint8_t qs[64];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ2_XS) == 74);

// iq2_s, 82 bytes, 2.5625 bits/weight; scales per 16 weights:
//   x[i] = d * (2s + 1) / 8 * grid[g][i % 8] * sign
//   0      2              34              66       74           82
//   | d f16 | idx[32]      | signs[32]     | qh[8]  | scales[8] |
// Group g: grid index (kIq2sGrid) idx[g] | bits 2l..2l+1 of qh[g / 4] << 8 (l = g % 4);
// signs[g] bit j: weight j negative. scales as iq2_xs.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[64];  // idx[32], then signs[32]
  uint8_t qh[8];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ2_S) == 82);

// iq3_xxs, 98 bytes, 3.0625 bits/weight; groups of 4 for the grid, of 8 for the signs:
//   x[i] = d * (2s + 1) / 4 * grid[q][i % 4] * sign
//   0      2                          66                        98
//   | d f16 | idx[64]: one per 4 weights | scales_signs[32]: u32 per sub-block |
// idx: kIq3xxsGrid rows. The u32 of sub-block k: bits 7l..7l+6 sign index (kIqSigns) of
// weights 32k+8l..32k+8l+7, bits 28-31 the scale s.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[96];  // idx[64], then scales_signs[32]
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

// iq3_s, 110 bytes, 3.4375 bits/weight:
//   x[i] = d * (2s + 1) * grid[q][i % 4] * sign
//   0      2                66       74          106          110
//   | d f16 | idx[64]        | qh[8]  | signs[32] | scales[4] |
// Group of 4 q (0..63): grid index (kIq3sGrid) idx[q] | (bit q % 8 of qh[q / 8]) << 8.
// signs[g] bit j: weight 8g+j negative. scales[k]: s of sub-block 2k lo, 2k+1 hi nibble.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
static_assert(sizeof(BlockIQ3_S) == 110);

// iq1_s, 50 bytes, 1.5625 bits/weight:
//   x[i] = d * (2s + 1) * (grid[g][i % 8] + delta),  grid bytes -1, 0, 1; delta = +-1/8
//   0      2                 34                    50
//   | d f16 | idx[32] low 8 bits | qh[8] u16 per sub-block |
// qh[k]: bits 3l..3l+2 = bits 8-10 of the grid index (kIq1sGrid) of group 4k+l;
// bits 12-14 the scale s; bit 15 set: delta = -1/8.
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];
};
static_assert(sizeof(BlockIQ1_S) == 50);

// iq1_m, 56 bytes, 1.75 bits/weight; scales per 16 weights, deltas per 8, no d field:
//   x[i] = d * (2s + 1) * (grid[g][i % 8] + delta_g)
//   0                   32               48                   56
//   | idx[32] low 8 bits | qh[16]         | scales: 4 x u16    |
// qh[g / 2]: group g even in bits 0-3, odd in bits 4-7: 3 high bits of the grid index,
// then the delta bit (set: -1/8). scales u16 m: bits 3j..3j+2 = s of weights 64m+16j..+15
// (j = 0..3); bits 12-15 = bits 4m..4m+3 of d's f16.
struct BlockIQ1_M {
  uint8_t qs[32];
  uint8_t qh[16];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ1_M) == 56);

// A block decoded to integers, the form the kernels compute with:
//   x[i] = d * scale[i / 16] * q[i]
// q is the signed grid value (IQ1: 8 * grid +- 1, the delta folded in; d carries the 1/8),
// |q| <= 62; scale = 2s + 1 <= 31. The product d * scale is the reference's per-sub-block
// scale to the bit, so dequantization is exact.
struct GridInts {
  int8_t q[kQK_K];
  uint8_t scale[16];
  float d;
};

void decode_iq2_xxs(const BlockIQ2_XXS& b, GridInts& out);
void decode_iq2_xs(const BlockIQ2_XS& b, GridInts& out);
void decode_iq2_s(const BlockIQ2_S& b, GridInts& out);
void decode_iq3_xxs(const BlockIQ3_XXS& b, GridInts& out);
void decode_iq3_s(const BlockIQ3_S& b, GridInts& out);
void decode_iq1_s(const BlockIQ1_S& b, GridInts& out);
void decode_iq1_m(const BlockIQ1_M& b, GridInts& out);

// REQUIRES (all): n % kQK_K == 0; x holds n / kQK_K blocks, y n floats.
void dequantize_row_iq2_xxs(const BlockIQ2_XXS* x, float* y, int64_t n);
void dequantize_row_iq2_xs(const BlockIQ2_XS* x, float* y, int64_t n);
void dequantize_row_iq2_s(const BlockIQ2_S* x, float* y, int64_t n);
void dequantize_row_iq3_xxs(const BlockIQ3_XXS* x, float* y, int64_t n);
void dequantize_row_iq3_s(const BlockIQ3_S* x, float* y, int64_t n);
void dequantize_row_iq1_s(const BlockIQ1_S* x, float* y, int64_t n);
void dequantize_row_iq1_m(const BlockIQ1_M* x, float* y, int64_t n);

}  // namespace herd::quant
