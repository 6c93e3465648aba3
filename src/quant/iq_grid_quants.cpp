// Decoding and dequantization of the grid-based types (layouts in iq_grid_quants.h).
// Every type decodes to GridInts first, so the kernels and the dequantizers read the bits
// in one place.
#include "quant/iq_grid_quants.h"

#include <cstring>

#include "quant/float16.h"
#include "quant/iq_grids.h"

namespace herd::quant {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Byte j of a grid row (rows are little-endian words: weight j in bits 8j..8j+7).
int grid_byte(uint64_t row, int j) {
  return int(int8_t(uint8_t(row >> (8 * j))));
}

// n weights of magnitudes `row`, negated where `signs` has a bit set.
void signed_group(uint64_t row, uint8_t signs, int n, int8_t* q) {
  for (int j = 0; j < n; ++j) {
    const int m = grid_byte(row, j);
    q[j] = int8_t(signs >> j & 1 ? -m : m);
  }
}

// IQ1: 8 * (grid + delta), delta = +-1/8.
void iq1_group(uint64_t row, bool negative_delta, int8_t* q) {
  for (int j = 0; j < 8; ++j) q[j] = int8_t(8 * grid_byte(row, j) + (negative_delta ? -1 : 1));
}

}  // namespace

void decode_iq2_xxs(const BlockIQ2_XXS& b, GridInts& out) {
  out.d = fp16_to_fp32(b.d) * 0.125f;
  for (int k = 0; k < 8; ++k) {
    const uint8_t* sub = b.qs + 8 * k;
    const uint32_t signs_scale = load_u32(sub + 4);
    for (int l = 0; l < 4; ++l) {
      signed_group(kIq2xxsGrid[sub[l]], kIqSigns[(signs_scale >> (7 * l)) & 127], 8,
                   out.q + 32 * k + 8 * l);
    }
    out.scale[2 * k] = out.scale[2 * k + 1] = uint8_t(2 * (signs_scale >> 28) + 1);
  }
}

void decode_iq2_xs(const BlockIQ2_XS& b, GridInts& out) {
  out.d = fp16_to_fp32(b.d) * 0.125f;
  for (int g = 0; g < 32; ++g) {
    const uint16_t v = load_u16(b.qs + 2 * g);
    signed_group(kIq2xsGrid[v & 511], kIqSigns[v >> 9], 8, out.q + 8 * g);
  }
  for (int k = 0; k < 8; ++k) {
    out.scale[2 * k] = uint8_t(2 * (b.scales[k] & 15) + 1);
    out.scale[2 * k + 1] = uint8_t(2 * (b.scales[k] >> 4) + 1);
  }
}

void decode_iq2_s(const BlockIQ2_S& b, GridInts& out) {
  out.d = fp16_to_fp32(b.d) * 0.125f;
  const uint8_t* idx = b.qs;
  const uint8_t* signs = b.qs + 32;
  for (int g = 0; g < 32; ++g) {
    const int high = (b.qh[g / 4] >> (2 * (g % 4))) & 3;
    signed_group(kIq2sGrid[idx[g] | high << 8], signs[g], 8, out.q + 8 * g);
  }
  for (int k = 0; k < 8; ++k) {
    out.scale[2 * k] = uint8_t(2 * (b.scales[k] & 15) + 1);
    out.scale[2 * k + 1] = uint8_t(2 * (b.scales[k] >> 4) + 1);
  }
}

void decode_iq3_xxs(const BlockIQ3_XXS& b, GridInts& out) {
  out.d = fp16_to_fp32(b.d) * 0.25f;
  const uint8_t* idx = b.qs;
  for (int k = 0; k < 8; ++k) {
    const uint32_t signs_scale = load_u32(b.qs + 64 + 4 * k);
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = kIqSigns[(signs_scale >> (7 * l)) & 127];
      int8_t* q = out.q + 32 * k + 8 * l;
      signed_group(kIq3xxsGrid[idx[8 * k + 2 * l]], signs, 4, q);
      signed_group(kIq3xxsGrid[idx[8 * k + 2 * l + 1]], uint8_t(signs >> 4), 4, q + 4);
    }
    out.scale[2 * k] = out.scale[2 * k + 1] = uint8_t(2 * (signs_scale >> 28) + 1);
  }
}

void decode_iq3_s(const BlockIQ3_S& b, GridInts& out) {
  out.d = fp16_to_fp32(b.d);
  for (int q = 0; q < 64; ++q) {
    const int high = (b.qh[q / 8] >> (q % 8)) & 1;
    const uint8_t signs = uint8_t(b.signs[q / 2] >> (4 * (q % 2)));
    signed_group(kIq3sGrid[b.qs[q] | high << 8], signs, 4, out.q + 4 * q);
  }
  for (int k = 0; k < 8; ++k) {
    const int s = (b.scales[k / 2] >> (4 * (k % 2))) & 15;
    out.scale[2 * k] = out.scale[2 * k + 1] = uint8_t(2 * s + 1);
  }
}

void decode_iq1_s(const BlockIQ1_S& b, GridInts& out) {
  out.d = fp16_to_fp32(b.d) * 0.125f;
  for (int k = 0; k < 8; ++k) {
    const uint16_t qh = b.qh[k];
    for (int l = 0; l < 4; ++l) {
      const int index = b.qs[4 * k + l] | ((qh >> (3 * l)) & 7) << 8;
      iq1_group(kIq1sGrid[index], qh & 0x8000, out.q + 32 * k + 8 * l);
    }
    out.scale[2 * k] = out.scale[2 * k + 1] = uint8_t(2 * ((qh >> 12) & 7) + 1);
  }
}

void decode_iq1_m(const BlockIQ1_M& b, GridInts& out) {
  uint16_t sc[4];
  for (int m = 0; m < 4; ++m) sc[m] = load_u16(b.scales + 2 * m);
  const uint16_t d_bits =
      uint16_t((sc[0] >> 12) | (sc[1] >> 8 & 0x00f0) | (sc[2] >> 4 & 0x0f00) | (sc[3] & 0xf000));
  out.d = fp16_to_fp32(d_bits) * 0.125f;
  for (int g = 0; g < 32; ++g) {
    const int h = b.qh[g / 2] >> (4 * (g % 2));
    iq1_group(kIq1sGrid[b.qs[g] | (h & 7) << 8], h & 8, out.q + 8 * g);
  }
  for (int j = 0; j < 16; ++j) out.scale[j] = uint8_t(2 * ((sc[j / 4] >> (3 * (j % 4))) & 7) + 1);
}

// ---- dequantization: x = (d * scale) * q, the reference's products to the bit ----------

namespace {

template <typename Block, void (*kDecode)(const Block&, GridInts&)>
void dequantize_grid_row(const Block* x, float* y, int64_t n) {
  GridInts ints;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    kDecode(x[b], ints);
    for (int s = 0; s < 16; ++s) {
      const float ds = ints.d * float(ints.scale[s]);
      for (int i = 16 * s; i < 16 * s + 16; ++i) y[i] = ds * float(ints.q[i]);
    }
    y += kQK_K;
  }
}

}  // namespace

void dequantize_row_iq2_xxs(const BlockIQ2_XXS* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ2_XXS, decode_iq2_xxs>(x, y, n);
}
void dequantize_row_iq2_xs(const BlockIQ2_XS* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ2_XS, decode_iq2_xs>(x, y, n);
}
void dequantize_row_iq2_s(const BlockIQ2_S* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ2_S, decode_iq2_s>(x, y, n);
}
void dequantize_row_iq3_xxs(const BlockIQ3_XXS* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ3_XXS, decode_iq3_xxs>(x, y, n);
}
void dequantize_row_iq3_s(const BlockIQ3_S* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ3_S, decode_iq3_s>(x, y, n);
}
void dequantize_row_iq1_s(const BlockIQ1_S* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ1_S, decode_iq1_s>(x, y, n);
}
void dequantize_row_iq1_m(const BlockIQ1_M* x, float* y, int64_t n) {
  dequantize_grid_row<BlockIQ1_M, decode_iq1_m>(x, y, n);
}

}  // namespace herd::quant
