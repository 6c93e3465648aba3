// Quantized block layouts, byte for byte as in GGUF files (ggml's ggml-common.h).
// Every multi-byte field is little-endian; f16 fields hold raw IEEE half bits (see
// float16.h). Each struct is declared once here and its size asserted; kernels, the
// quantizers and the GGUF reader all use these.
//
// Element order: element i of a block is the i-th value of the row segment it encodes.
// "nibble j lo/hi" below means bits 0-3 / 4-7 of byte j.
#pragma once

#include <cstddef>
#include <cstdint>

namespace herd::quant {

inline constexpr int kQK = 32;     // elements per legacy block (q4_0 ... q8_1)
inline constexpr int kQK_K = 256;  // elements per K-quant super-block (q2_K ... q8_K)
inline constexpr int kKScaleSize = 12;

// ---- legacy 32-element blocks ---------------------------------------------------------

// q4_0, 18 bytes, 4.5 bits/weight:  x[i] = d * (q[i] - 8)
//   0      2                                  18
//   | d f16 | qs[16]: byte j = q[j] lo, q[j+16] hi |
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// q4_1, 20 bytes, 5 bits/weight:  x[i] = d * q[i] + m
//   0      2      4                                  20
//   | d f16 | m f16 | qs[16]: byte j = q[j] lo, q[j+16] hi |
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// q5_0, 22 bytes, 5.5 bits/weight:  x[i] = d * (q[i] - 16), q[i] 5 bits
//   0      2                 6                                   22
//   | d f16 | qh u32 (bit i = bit 4 of q[i]) | qs[16]: low 4 bits as in q4_0 |
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// q5_1, 24 bytes, 6 bits/weight:  x[i] = d * q[i] + m, q[i] 5 bits
//   0      2      4               8                                   24
//   | d f16 | m f16 | qh u32 (bit i = bit 4 of q[i]) | qs[16]: low 4 bits as in q4_0 |
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// q8_0, 34 bytes, 8.5 bits/weight:  x[i] = d * qs[i]
//   0      2                34
//   | d f16 | qs[32] int8 |
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// q8_1, 36 bytes (activations for q4_1/q5_1 dot products):  x[i] = d * qs[i]
//   0      2                    4                36
//   | d f16 | s f16 = d * sum(qs) | qs[32] int8 |
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

// ---- K-quant 256-element super-blocks ---------------------------------------------------

// q2_K, 84 bytes, 2.625 bits/weight; 16 sub-blocks of 16:
//   x[i] = d * (scales[s] & 15) * q[i] - dmin * (scales[s] >> 4),  s = i / 16, q 2 bits
//   0            16                 80      82         84
//   | scales[16] | qs[64]           | d f16 | dmin f16 |
// qs: for half h (128 elements) and l in 0..31, byte 32h+l holds, from bit 0 up in 2-bit
// fields, q[128h+l], q[128h+l+32], q[128h+l+64], q[128h+l+96].
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// q3_K, 110 bytes, 3.4375 bits/weight; 16 sub-blocks of 16:
//   x[i] = d * (sc[s] - 32) * (q[i] - 4),  s = i / 16, sc 6 bits, q 3 bits
//   0           32       96           108     110
//   | hmask[32] | qs[64] | scales[12] | d f16 |
// Low 2 bits of q as in q2_K's qs; bit 2 of q[i] is bit (i / 32) of hmask[i % 32].
// scales: the low 4 bits of sc[s] are the lo nibble of byte s (s < 8) or the hi nibble of
// byte s - 8 (s >= 8); its high 2 bits are bits 2*(s / 4)..2*(s / 4)+1 of byte 8 + s % 4.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// q4_K, 144 bytes, 4.5 bits/weight; 8 sub-blocks of 32:
//   x[i] = d * sc[s] * q[i] - dmin * mn[s],  s = i / 32, sc and mn 6 bits, q 4 bits
//   0      2         4            16         144
//   | d f16 | dmin f16 | scales[12] | qs[128] |
// scales (sc, mn 6 bits each, see get_scale_min_k4): for s < 4, sc[s] = b[s] & 63 and
// mn[s] = b[s+4] & 63; for s >= 4, sc[s] = (b[s+4] & 15) | (b[s-4] >> 6) << 4 and
// mn[s] = (b[s+4] >> 4) | (b[s] >> 6) << 4.
// qs: for pair p (64 elements), byte 32p+l = q[64p+l] lo, q[64p+l+32] hi.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// q5_K, 176 bytes, 5.5 bits/weight; as q4_K with a fifth bit:
//   0      2         4            16        48         176
//   | d f16 | dmin f16 | scales[12] | qh[32] | qs[128] |
// bit 4 of q[i] is bit (i / 32) of qh[i % 32].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// q6_K, 210 bytes, 6.5625 bits/weight; 16 sub-blocks of 16:
//   x[i] = d * scales[s] * (q[i] - 32),  s = i / 16, scales int8, q 6 bits
//   0         128      192                 208     210
//   | ql[128] | qh[64] | scales[16] int8  | d f16 |
// For half h (128 elements) and l in 0..31: ql[64h+l] = q[128h+l] lo, q[128h+l+64] hi;
// ql[64h+l+32] = q[128h+l+32] lo, q[128h+l+96] hi; qh[32h+l] holds the top 2 bits of
// q[128h+l], q[128h+l+32], q[128h+l+64], q[128h+l+96] from bit 0 up.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// q8_K, 292 bytes (activations for K-quant dot products):  x[i] = d * qs[i]
//   0      4          260               292
//   | d f32 | qs[256] | bsums[16] int16 |   bsums[j] = sum of qs[16j .. 16j+15]
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// ---- 4-bit non-linear types (iq4_quants.h) ------------------------------------------------
// Each 4-bit index selects one of 16 int8 levels (kValuesIq4nl or kValuesMxfp4) instead of
// a uniform grid; byte j of a 32-value group holds index j lo, index j+16 hi, as q4_0.

// iq4_nl, 18 bytes, 4.5 bits/weight:  x[i] = d * kValuesIq4nl[q[i]]
//   0      2                                   18
//   | d f16 | qs[16]: byte j = q[j] lo, q[j+16] hi |
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// iq4_xs, 136 bytes, 4.25 bits/weight; 8 sub-blocks of 32:
//   x[i] = d * (ls[s] - 32) * kValuesIq4nl[q[i]],  s = i / 32, ls 6 bits
//   0      2            4             8                                          136
//   | d f16 | scales_h u16 | scales_l[4] | qs[128]: 16 bytes per sub-block, as iq4_nl |
// ls[s] = (scales_l[s / 2] >> 4 * (s % 2) & 15) | (scales_h >> 2 * s & 3) << 4.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// mxfp4 (OCP microscaling FP4, E2M1 values with an E8M0 scale), 17 bytes, 4.25 bits/weight:
//   x[i] = 2^(e - 128) * kValuesMxfp4[q[i]]   (kValuesMxfp4 holds doubled E2M1 values,
//                                              hence 2^(e-128), half the E8M0 scale 2^(e-127))
//   0       1                                   17
//   | e u8  | qs[16]: byte j = q[j] lo, q[j+16] hi |
// 17 bytes: blocks in a row are not even 2-byte aligned.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace herd::quant
