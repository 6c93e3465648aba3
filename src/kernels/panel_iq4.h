// Panels (see panel_layout.h) of the 4-bit non-linear types iq4_nl, iq4_xs and mxfp4. Their
// 4-bit indices stay packed as in GGUF; the kernels turn them into int8 levels with a
// 16-entry table lookup per byte (pshufb / vpshufb / tbl), then run the same integer dot
// products as the q8_0 panels (panel_iq4_gemm.h).
//
// iq4_nl: the GGUF block is q4_0's (f16 d, 16 bytes of nibbles), so its panels are
// PanelQ4_0's, packed by pack_q4_0; only the unpacker differs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"

namespace herd::kernels {

// mxfp4, 272 bytes (as small as the 16 GGUF blocks):  x = 2^(e - 128) * kValuesMxfp4[q]
//   0             16                                                      272
//   | e[16] E8M0  | qs[4][64]: nibble vector j: lo group j, hi group j+4   |
// The kernels make the scale from e's bits (e << 23 is the float 2^(e-127), halved): exact
// for e in 1..254. e = 0 (true scale 2^-128) reads as 0 and e = 255 as inf; the quantizer
// writes e = 0 only for blocks whose values are all 0 or below 2^-125, and never 255
// (float magnitudes below 2^128 give e <= 252).
struct PanelMXFP4 {
  uint8_t e[16];
  uint8_t qs[4][64];
};
static_assert(sizeof(PanelMXFP4) == 272);

// iq4_xs, 2208 bytes (GGUF 2176, +1.5%); sub-blocks of 32, chunk c = sub-blocks 2c, 2c+1:
//   x = d * sc * kValuesIq4nl[q],  sc = ls - 32 in -32..31
//   0          32                    160                                          2208
//   | d[16] f16 | scales[4][32] int8 | qs[8][4][64]: sub-block s, nibble vector j |
// scales[c]: byte 2r + e = sc of sub-block 2c + e, row r (pairs as the K-quant panels).
// qs[s][j]: lo group j, hi group j+4 of sub-block s (GGUF bytes 16s+4j..16s+4j+3 of row r,
// the q4_0 arrangement per sub-block).
struct PanelIQ4_XS {
  uint16_t d[16];
  int8_t scales[4][32];
  uint8_t qs[8][4][64];
};
static_assert(sizeof(PanelIQ4_XS) == 2208);

// Packing (panel_pack_iq4.cpp), for the baseline CPU like panel_pack.cpp.
// REQUIRES: cols a multiple of the block size; dst holds *_panel_bytes(rows, cols) bytes.
size_t mxfp4_panel_bytes(int64_t rows, int64_t cols);
void pack_mxfp4(const MatrixView& w, uint8_t* dst);
size_t iq4_xs_panel_bytes(int64_t rows, int64_t cols);
void pack_iq4_xs(const MatrixView& w, uint8_t* dst);

}  // namespace herd::kernels
