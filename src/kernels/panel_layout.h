// The repacked weight layout of the SIMD kernels ("panels"). pack_matrix converts GGUF
// rows into it once, at load time.
//
// A panel is 16 consecutive rows (the matrix is padded with zero rows to a multiple of 16).
// Panel p stores its blocks in order, block b of all 16 rows together:
//
//   packed matrix: | panel 0: block 0 | block 1 | ... | panel 1: block 0 | ...
//
// Inside a panel block the quants come as 64-byte "lane vectors": lane r (bytes 4r..4r+3)
// holds 4 consecutive values of row r, a "group" (group g = values 4g..4g+3 of the block,
// or of the sub-block for K-quants):
//
//   lane vector of group g:  | row 0: q[4g..4g+3] | row 1: q[4g..4g+3] | ... | row 15 |
//                            0                    4                          60     64
//
// So one 64-byte load gives 16 rows x 4 values; a 4-byte dot product per 32-bit lane
// (x86 vpdpbusd, arm sdot) against 4 activation values broadcast to all lanes advances all
// 16 rows at once, with no horizontal sums and no shuffles. A 512-bit register holds one
// lane vector, AVX2 two 256-bit halves (rows 0-7, 8-15), NEON four 128-bit quarters.
// Sub-byte quants share a lane vector between groups: nibble vector "j: lo g, hi h" holds
// group g in bits 0-3 and group h in bits 4-7 of every byte. Each packed field below is a
// plain 4-byte copy of the GGUF bytes where the GGUF layout allows it (q4_0, q4_K).
//
// Quants are stored unsigned where the type allows (q4_0 as 0..15, not -8..7): x86 VNNI
// multiplies unsigned by signed bytes only. The type's offset (q - 8 for q4_0) is folded
// into the activations' block sums instead (see activations.h).
// Scales d, m, dmin stay f16, as in GGUF: a panel is as small as the GGUF rows it holds
// (q4_K and q3_K +3%, q5_K +2%: their 6-bit scales are stored as bytes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"

namespace herd::kernels {

inline constexpr int kPanelRows = 16;

// ---- legacy 32-element blocks (8 groups) ----------------------------------------------------

// q4_0, 288 bytes:  x = d * (q - 8)
//   0          32                                                      288
//   | d[16] f16 | qs[4][64]: nibble vector j: lo group j, hi group j+4 |
struct PanelQ4_0 {
  uint16_t d[16];
  uint8_t qs[4][64];
};
static_assert(sizeof(PanelQ4_0) == 288);

// q4_1, 320 bytes:  x = d * q + m
//   0          32          64                     320
//   | d[16] f16 | m[16] f16 | qs[4][64] as q4_0   |
struct PanelQ4_1 {
  uint16_t d[16];
  uint16_t m[16];
  uint8_t qs[4][64];
};
static_assert(sizeof(PanelQ4_1) == 320);

// q5_0, 352 bytes:  x = d * (q - 16)
//   0          32                                                  96                  352
//   | d[16] f16 | qh[64]: bit g of byte 4r+i = bit 4 of row r q[4g+i] | qs[4][64] as q4_0 |
struct PanelQ5_0 {
  uint16_t d[16];
  uint8_t qh[64];
  uint8_t qs[4][64];
};
static_assert(sizeof(PanelQ5_0) == 352);

// q5_1, 384 bytes:  x = d * q + m
//   0          32          64          128                 384
//   | d[16] f16 | m[16] f16 | qh[64] as q5_0 | qs[4][64] as q4_0 |
struct PanelQ5_1 {
  uint16_t d[16];
  uint16_t m[16];
  uint8_t qh[64];
  uint8_t qs[4][64];
};
static_assert(sizeof(PanelQ5_1) == 384);

// q8_0, 544 bytes:  x = d * q, q signed
//   0          32                                 544
//   | d[16] f16 | qs[8][64] int8: lane vector of group g |
struct PanelQ8_0 {
  uint16_t d[16];
  int8_t qs[8][64];
};
static_assert(sizeof(PanelQ8_0) == 544);

// ---- K-quant 256-element super-blocks ---------------------------------------------------------
// A "chunk" is two consecutive sub-blocks; per-sub-block scales are stored as byte pairs
// [chunk][row][2] (sub-block 2c of row r at 2r, sub-block 2c+1 at 2r+1), so that one
// widening load gives 16 rows x 2 sub-blocks as int16 pairs for a 16-bit dot product
// (vpdpwssd) with the activations' pairs of block sums.

// q4_K, 2368 bytes; sub-blocks of 32, chunk p = sub-blocks 2p, 2p+1 (64 values):
//   x = d * sc * q - dmin * mn
//   0          32             64               192             320                    2368
//   | d[16] f16 | dmin[16] f16 | scales[4][32] | mins[4][32]   | qs[4][8][64]         |
// qs[p][j]: nibble vector, lo group j of sub-block 2p, hi group j of sub-block 2p+1
// (byte 4r+i = GGUF qs[32p+4j+i] of row r).
struct PanelQ4_K {
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t scales[4][32];
  uint8_t mins[4][32];
  uint8_t qs[4][8][64];
};
static_assert(sizeof(PanelQ4_K) == 2368);

// q5_K, 2880 bytes: q4_K with the fifth bits beside each chunk's nibbles, so that the
// kernel reads every panel block front to back (two interleaved streams would defeat the
// hardware prefetchers when decoding from memory):
//   0 ... 320            | chunk 0: qs[8][64], qh[2][64] (640) | chunk 1 | ... | chunk 3 |
//   | as q4_K up to mins |
// qs as q4_K; qh[e] bit j of byte 4r+i = bit 4 of group j, value i, sub-block 2p+e, row r.
struct PanelQ5_K {
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t scales[4][32];
  uint8_t mins[4][32];
  struct Chunk {
    uint8_t qs[8][64];
    uint8_t qh[2][64];
  } chunks[4];
};
static_assert(sizeof(PanelQ5_K) == 2880);

// q6_K, 3360 bytes; sub-blocks of 16, chunk c = sub-blocks 2c, 2c+1 (32 values, groups
// 0-3 in sub-block 2c, 4-7 in 2c+1):  x = d * sc * (q - 32), sc int8, q 6 bits
//   0          32                    288                                           3360
//   | d[16] f16 | scales[8][32] int8 | chunk 0: ql[4][64], qh[2][64] (384) | ... | chunk 7 |
// ql[j]: nibble vector of the low 4 bits, lo group j, hi group j+4.
// qh[e]: bits 2j..2j+1 of byte 4r+i = bits 4-5 of group 4e+j, value i.
struct PanelQ6_K {
  uint16_t d[16];
  int8_t scales[8][32];
  struct Chunk {
    uint8_t ql[4][64];
    uint8_t qh[2][64];
  } chunks[8];
};
static_assert(sizeof(PanelQ6_K) == 3360);

// q3_K, 1824 bytes; sub-blocks of 16, chunks as q6_K:  x = d * sc * (q - 4), sc -32..31
//   0          32                    288                                         1824
//   | d[16] f16 | scales[8][32] int8 | chunk 0: ql[2][64], qh[64] (192) | ... | chunk 7 |
// ql[e]: bits 2j..2j+1 of byte 4r+i = bits 0-1 of group 4e+j, value i.
// qh: bit g of byte 4r+i = bit 2 of group g, value i.
struct PanelQ3_K {
  uint16_t d[16];
  int8_t scales[8][32];
  struct Chunk {
    uint8_t ql[2][64];
    uint8_t qh[64];
  } chunks[8];
};
static_assert(sizeof(PanelQ3_K) == 1824);

// q2_K, 1344 bytes; sub-blocks of 16, chunks as q6_K:  x = d * sc * q - dmin * mn
//   0          32             64                                    320             1344
//   | d[16] f16 | dmin[16] f16 | scales[8][32]: sc lo nibble, mn hi | ql[8][2][64] as q3_K |
struct PanelQ2_K {
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t scales[8][32];
  uint8_t ql[8][2][64];
};
static_assert(sizeof(PanelQ2_K) == 1344);

// ---- packing (panel_pack.cpp) ----------------------------------------------------------------
// Defined in a file compiled for the baseline CPU (these run once, at load time); the ISA
// files only take their addresses. REQUIRES: cols a multiple of the type's block size;
// dst holds *_panel_bytes(rows, cols) bytes.

size_t q4_0_panel_bytes(int64_t rows, int64_t cols);
void pack_q4_0(const MatrixView& w, uint8_t* dst);
size_t q4_1_panel_bytes(int64_t rows, int64_t cols);
void pack_q4_1(const MatrixView& w, uint8_t* dst);
size_t q5_0_panel_bytes(int64_t rows, int64_t cols);
void pack_q5_0(const MatrixView& w, uint8_t* dst);
size_t q5_1_panel_bytes(int64_t rows, int64_t cols);
void pack_q5_1(const MatrixView& w, uint8_t* dst);
size_t q8_0_panel_bytes(int64_t rows, int64_t cols);
void pack_q8_0(const MatrixView& w, uint8_t* dst);
size_t q2_k_panel_bytes(int64_t rows, int64_t cols);
void pack_q2_k(const MatrixView& w, uint8_t* dst);
size_t q3_k_panel_bytes(int64_t rows, int64_t cols);
void pack_q3_k(const MatrixView& w, uint8_t* dst);
size_t q4_k_panel_bytes(int64_t rows, int64_t cols);
void pack_q4_k(const MatrixView& w, uint8_t* dst);
size_t q5_k_panel_bytes(int64_t rows, int64_t cols);
void pack_q5_k(const MatrixView& w, uint8_t* dst);
size_t q6_k_panel_bytes(int64_t rows, int64_t cols);
void pack_q6_k(const MatrixView& w, uint8_t* dst);

}  // namespace herd::kernels
