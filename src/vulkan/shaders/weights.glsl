// The weights' side of matvec.comp and get_rows.comp: byte-packed reads of W and, per
// weight type, unit_dot(row, u): the dot product of 32-weight unit u of the row at byte `row`
// with X(x_base + 32 u + i), i < 32. The includer declares W (uint w[]), uint x_base, and
// X(i): the activations (matvec) or a one-hot vector (get_rows: the weight itself).
// With UNIT_OUT(i, value) defined (matmul.comp), the quant types also get
// unit_weights(row, u): unit u's 32 weights dequantized, weight i passed to UNIT_OUT.
// ---- byte-packed reads (off: a byte offset into W)
uint load_u8(uint off) {
  return (w[off >> 2] >> ((off & 3u) * 8u)) & 0xffu;
}
int load_i8(uint off) {
  return int(load_u8(off) << 24) >> 24;
}
// REQUIRES: off even (every f16 of a GGUF block is).
float load_f16(uint off) {
  const uint word = w[off >> 2];
  return unpackHalf2x16((off & 2u) != 0u ? word >> 16 : word).x;
}
// REQUIRES: off even. Reads only the word that holds both bytes.
uint load_u16(uint off) {
  return (w[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu;
}
// Four bytes from any offset; reads only words that hold at least one of them, so a
// buffer rounded up to 4 bytes is never read past its end.
uint load_u32(uint off) {
  const uint shift = (off & 3u) * 8u;
  const uint lo = w[off >> 2];
  return shift == 0u ? lo : (lo >> shift) | (w[(off >> 2) + 1u] << (32u - shift));
}

// ---- one 32-weight unit u of a row (starting at byte `row`) against X(xb .. xb + 32)
#if defined(WEIGHT_Q4_0)
// 18 bytes: d f16 | qs[16]: byte j = q[j] lo, q[j+16] hi; x = d * (q - 8)
float unit_dot(uint row, uint u) {
  const uint off = row + u * 18u;
  const uint xb = x_base + u * 32u;
  float sum = 0.0;
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + 2u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      const uint i = 4u * k + j;
      sum += (float(q & 15u) - 8.0) * X(xb + i) + (float(q >> 4) - 8.0) * X(xb + i + 16u);
    }
  }
  return load_f16(off) * sum;
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint off = row + u * 18u;
  const float d = load_f16(off);
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + 2u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      UNIT_OUT(4u * k + j, d * (float(q & 15u) - 8.0));
      UNIT_OUT(4u * k + j + 16u, d * (float(q >> 4) - 8.0));
    }
  }
}
#endif
#elif defined(WEIGHT_Q4_1)
// 20 bytes: d f16 | m f16 | qs[16] as q4_0; x = d * q + m
float unit_dot(uint row, uint u) {
  const uint off = row + u * 20u;
  const uint xb = x_base + u * 32u;
  float qsum = 0.0, xsum = 0.0;
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + 4u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      const uint i = 4u * k + j;
      qsum += float(q & 15u) * X(xb + i) + float(q >> 4) * X(xb + i + 16u);
      xsum += X(xb + i) + X(xb + i + 16u);
    }
  }
  return load_f16(off) * qsum + load_f16(off + 2u) * xsum;
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint off = row + u * 20u;
  const float d = load_f16(off), m = load_f16(off + 2u);
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + 4u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      UNIT_OUT(4u * k + j, d * float(q & 15u) + m);
      UNIT_OUT(4u * k + j + 16u, d * float(q >> 4) + m);
    }
  }
}
#endif
#elif defined(WEIGHT_Q5_0) || defined(WEIGHT_Q5_1)
// q5_0, 22 bytes: d f16 | qh u32 | qs[16]; x = d * (q - 16)
// q5_1, 24 bytes: d f16 | m f16 | qh u32 | qs[16]; x = d * q + m
// q: 4 low bits as in q4_0, bit 4 of q[i] is bit i of qh.
#if defined(WEIGHT_Q5_0)
const uint kBlock = 22u, kQh = 2u;
#else
const uint kBlock = 24u, kQh = 4u;
#endif
float unit_dot(uint row, uint u) {
  const uint off = row + u * kBlock;
  const uint xb = x_base + u * 32u;
  const uint qh = load_u32(off + kQh);
  float qsum = 0.0, xsum = 0.0;
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + kQh + 4u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      const uint i = 4u * k + j;
      const uint lo = (q & 15u) | (((qh >> i) & 1u) << 4);
      const uint hi = (q >> 4) | (((qh >> (i + 16u)) & 1u) << 4);
      qsum += float(lo) * X(xb + i) + float(hi) * X(xb + i + 16u);
      xsum += X(xb + i) + X(xb + i + 16u);
    }
  }
#if defined(WEIGHT_Q5_0)
  return load_f16(off) * (qsum - 16.0 * xsum);
#else
  return load_f16(off) * qsum + load_f16(off + 2u) * xsum;
#endif
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint off = row + u * kBlock;
  const uint qh = load_u32(off + kQh);
#if defined(WEIGHT_Q5_0)
  const float d = load_f16(off), m = -16.0 * d;
#else
  const float d = load_f16(off), m = load_f16(off + 2u);
#endif
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + kQh + 4u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      const uint i = 4u * k + j;
      UNIT_OUT(i, d * float((q & 15u) | (((qh >> i) & 1u) << 4)) + m);
      UNIT_OUT(i + 16u, d * float((q >> 4) | (((qh >> (i + 16u)) & 1u) << 4)) + m);
    }
  }
}
#endif
#elif defined(WEIGHT_IQ4_NL) || defined(WEIGHT_MXFP4)
// iq4_nl, 18 bytes: d f16 | qs[16] as q4_0; x = d * kValuesIq4nl[q]
// mxfp4, 17 bytes: e u8 | qs[16] as q4_0; x = 2^(e - 128) * kValuesMxfp4[q] (quant/iq4_quants.h)
#if defined(WEIGHT_IQ4_NL)
const float kLevels[16] = {-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                           1.0,    13.0,   25.0,  38.0,  53.0,  69.0,  89.0,  113.0};
const uint kBlock = 18u, kQs = 2u;
#else
const float kLevels[16] = {0.0, 1.0,  2.0,  3.0,  4.0,  6.0,  8.0,  12.0,
                           0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0};
const uint kBlock = 17u, kQs = 1u;
#endif
float unit_dot(uint row, uint u) {
  const uint off = row + u * kBlock;
  const uint xb = x_base + u * 32u;
  float sum = 0.0;
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + kQs + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      const uint i = 4u * k + j;
      sum += kLevels[q & 15u] * X(xb + i) + kLevels[q >> 4] * X(xb + i + 16u);
    }
  }
#if defined(WEIGHT_IQ4_NL)
  return load_f16(off) * sum;
#else
  const uint e = load_u8(off);  // 2^(e - 128); e < 2 is a subnormal, as quant's mxfp4_scale
  return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23) * sum;
#endif
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint off = row + u * kBlock;
#if defined(WEIGHT_IQ4_NL)
  const float d = load_f16(off);
#else
  const uint e = load_u8(off);
  const float d = uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23);
#endif
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = load_u32(off + kQs + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      UNIT_OUT(4u * k + j, d * kLevels[q & 15u]);
      UNIT_OUT(4u * k + j + 16u, d * kLevels[q >> 4]);
    }
  }
}
#endif
#elif defined(WEIGHT_IQ4_XS)
// 136 bytes per 256: d f16 | scales_h u16 | scales_l[4] | qs[128]: sub-block s's 16 bytes at
// 8 + 16 s as iq4_nl; x = d * (ls[s] - 32) * kValuesIq4nl[q]
const float kLevels[16] = {-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                           1.0,    13.0,   25.0,  38.0,  53.0,  69.0,  89.0,  113.0};
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 136u;
  const uint xb = x_base + u * 32u;
  const uint ls = ((load_u8(off + 4u + s / 2u) >> (4u * (s % 2u))) & 15u) |
                  (((load_u32(off) >> (16u + 2u * s)) & 3u) << 4);
  const uint qs = (off + 8u + 16u * s) >> 2;  // word index (136 and 8 are 4-aligned)
  float sum = 0.0;
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = w[qs + k];
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      const uint i = 4u * k + j;
      sum += kLevels[q & 15u] * X(xb + i) + kLevels[q >> 4] * X(xb + i + 16u);
    }
  }
  return load_f16(off) * (float(ls) - 32.0) * sum;
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 136u;
  const uint ls = ((load_u8(off + 4u + s / 2u) >> (4u * (s % 2u))) & 15u) |
                  (((load_u32(off) >> (16u + 2u * s)) & 3u) << 4);
  const uint qs = (off + 8u + 16u * s) >> 2;
  const float d = load_f16(off) * (float(ls) - 32.0);
  for (uint k = 0; k < 4; ++k) {
    const uint q4 = w[qs + k];
    for (uint j = 0; j < 4; ++j) {
      const uint q = (q4 >> (8u * j)) & 0xffu;
      UNIT_OUT(4u * k + j, d * kLevels[q & 15u]);
      UNIT_OUT(4u * k + j + 16u, d * kLevels[q >> 4]);
    }
  }
}
#endif
#elif defined(WEIGHT_Q2_K)
// 84 bytes per 256: scales[16] | qs[64] | d f16 | dmin f16; 16 sub-blocks of 16:
// x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits. Unit t = 4h + j covers
// q[128h + 32j + l] = (qs[32h + l] >> 2j) & 3, l < 32 (scales 2t and 2t + 1).
float unit_dot(uint row, uint u) {
  const uint t = u % 8u;
  const uint h = t / 4u, j = t % 4u;
  const uint off = row + (u / 8u) * 84u;
  const uint xb = x_base + u * 32u;
  const uint qs = (off + 16u + 32u * h) >> 2;  // word index (84 and 16 are 4-aligned)
  float qsums[2] = {0.0, 0.0}, xsums[2] = {0.0, 0.0};
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = w[qs + k] >> (2u * j);
    for (uint b = 0; b < 4; ++b) {
      const float xv = X(xb + 4u * k + b);
      qsums[k / 4u] += float((q4 >> (8u * b)) & 3u) * xv;
      xsums[k / 4u] += xv;
    }
  }
  const uint sc0 = load_u8(off + 2u * t), sc1 = load_u8(off + 2u * t + 1u);
  return load_f16(off + 80u) * (float(sc0 & 15u) * qsums[0] + float(sc1 & 15u) * qsums[1]) -
         load_f16(off + 82u) * (float(sc0 >> 4) * xsums[0] + float(sc1 >> 4) * xsums[1]);
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint t = u % 8u;
  const uint h = t / 4u, j = t % 4u;
  const uint off = row + (u / 8u) * 84u;
  const uint qs = (off + 16u + 32u * h) >> 2;
  const float d = load_f16(off + 80u), dmin = load_f16(off + 82u);
  for (uint half_ = 0; half_ < 2; ++half_) {
    const uint sc = load_u8(off + 2u * t + half_);
    const float a = d * float(sc & 15u), b = dmin * float(sc >> 4);
    for (uint k = 4u * half_; k < 4u * half_ + 4u; ++k) {
      const uint q4 = w[qs + k] >> (2u * j);
      for (uint c = 0; c < 4; ++c) UNIT_OUT(4u * k + c, a * float((q4 >> (8u * c)) & 3u) - b);
    }
  }
}
#endif
#elif defined(WEIGHT_Q3_K)
// 110 bytes per 256: hmask[32] | qs[64] | scales[12] | d f16; 16 sub-blocks of 16:
// x = d * (sc[s] - 32) * (q - 4). Unit t = 4h + j covers i = 128h + 32j + l: low 2 bits
// (qs[32h + l] >> 2j) & 3 as q2_K, bit 2 is bit t of hmask[l]. sc: quant/k_quants.h
// get_scale_k3.
int scale_k3(uint off, uint s) {
  const uint low = s < 8u ? load_u8(off + 96u + s) & 15u : load_u8(off + 96u + s - 8u) >> 4;
  const uint high = (load_u8(off + 104u + s % 4u) >> (2u * (s / 4u))) & 3u;
  return int(low | (high << 4)) - 32;
}
float unit_dot(uint row, uint u) {
  const uint t = u % 8u;
  const uint h = t / 4u, j = t % 4u;
  const uint off = row + (u / 8u) * 110u;
  const uint xb = x_base + u * 32u;
  float sums[2] = {0.0, 0.0};
  for (uint k = 0; k < 8; ++k) {
    const uint lo4 = load_u32(off + 32u + 32u * h + 4u * k) >> (2u * j);
    const uint hi4 = load_u32(off + 4u * k) >> t;
    for (uint b = 0; b < 4; ++b) {
      const uint q = ((lo4 >> (8u * b)) & 3u) | (((hi4 >> (8u * b)) & 1u) << 2);
      sums[k / 4u] += (float(q) - 4.0) * X(xb + 4u * k + b);
    }
  }
  return load_f16(off + 108u) *
         (float(scale_k3(off, 2u * t)) * sums[0] + float(scale_k3(off, 2u * t + 1u)) * sums[1]);
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint t = u % 8u;
  const uint h = t / 4u, j = t % 4u;
  const uint off = row + (u / 8u) * 110u;
  const float d = load_f16(off + 108u);
  const float sc[2] = {d * float(scale_k3(off, 2u * t)), d * float(scale_k3(off, 2u * t + 1u))};
  for (uint k = 0; k < 8; ++k) {
    const uint lo4 = load_u32(off + 32u + 32u * h + 4u * k) >> (2u * j);
    const uint hi4 = load_u32(off + 4u * k) >> t;
    for (uint b = 0; b < 4; ++b) {
      const uint q = ((lo4 >> (8u * b)) & 3u) | (((hi4 >> (8u * b)) & 1u) << 2);
      UNIT_OUT(4u * k + b, sc[k / 4u] * (float(q) - 4.0));
    }
  }
}
#endif
#elif defined(WEIGHT_Q8_0)
// 34 bytes: d f16 | qs[32] int8; x = d * q
float unit_dot(uint row, uint u) {
  const uint off = row + u * 34u;
  const uint xb = x_base + u * 32u;
  float sum = 0.0;
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = load_u32(off + 2u + 4u * k);
    for (uint j = 0; j < 4; ++j) {
      const int q = int(q4 << (24u - 8u * j)) >> 24;
      sum += float(q) * X(xb + 4u * k + j);
    }
  }
  return load_f16(off) * sum;
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint off = row + u * 34u;
  const float d = load_f16(off);
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = load_u32(off + 2u + 4u * k);
    for (uint j = 0; j < 4; ++j) UNIT_OUT(4u * k + j, d * float(int(q4 << (24u - 8u * j)) >> 24));
  }
}
#endif
#elif defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
// The 6-bit scale and min of sub-block s from the 12 scale bytes at off + 4 (q4_K, q5_K).
void k_scale_min(uint off, uint s, out uint sc, out uint mn) {
  if (s < 4u) {
    sc = load_u8(off + 4u + s) & 63u;
    mn = load_u8(off + 8u + s) & 63u;
  } else {
    const uint b = load_u8(off + 8u + s);                  // scales[s + 4]
    sc = (b & 15u) | ((load_u8(off + s) >> 6) << 4);       // scales[s - 4] top bits
    mn = (b >> 4) | ((load_u8(off + 4u + s) >> 6) << 4);  // scales[s] top bits
  }
}
#if defined(WEIGHT_Q4_K)
// 144 bytes per 256: d f16 | dmin f16 | scales[12] | qs[128]; sub-block s of 32:
// x = d * sc[s] * q - dmin * mn[s]; qs byte 32 (s / 2) + l holds q lo (s even) or hi (odd).
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 144u;
  const uint xb = x_base + u * 32u;
  uint sc, mn;
  k_scale_min(off, s, sc, mn);
  const uint qs = (off + 16u + 32u * (s / 2u)) >> 2;  // word index (144 and 16 are 4-aligned)
  const uint shift = (s & 1u) * 4u;
  float qsum = 0.0, xsum = 0.0;
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = w[qs + k] >> shift;
    for (uint j = 0; j < 4; ++j) {
      const float xv = X(xb + 4u * k + j);
      qsum += float((q4 >> (8u * j)) & 15u) * xv;
      xsum += xv;
    }
  }
  return load_f16(off) * float(sc) * qsum - load_f16(off + 2u) * float(mn) * xsum;
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 144u;
  uint sc, mn;
  k_scale_min(off, s, sc, mn);
  const uint qs = (off + 16u + 32u * (s / 2u)) >> 2;
  const uint shift = (s & 1u) * 4u;
  const float a = load_f16(off) * float(sc), b = load_f16(off + 2u) * float(mn);
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = w[qs + k] >> shift;
    for (uint j = 0; j < 4; ++j) UNIT_OUT(4u * k + j, a * float((q4 >> (8u * j)) & 15u) - b);
  }
}
#endif
#else
// 176 bytes per 256: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]: as q4_K (its scales
// and nibbles, qs at 48) with bit 4 of q[32s + l] in bit s of qh[l].
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 176u;
  const uint xb = x_base + u * 32u;
  uint sc, mn;
  k_scale_min(off, s, sc, mn);
  const uint qs = (off + 48u + 32u * (s / 2u)) >> 2;  // word indices (176, 16, 48 4-aligned)
  const uint qh = (off + 16u) >> 2;
  const uint shift = (s & 1u) * 4u;
  float qsum = 0.0, xsum = 0.0;
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = w[qs + k] >> shift;
    const uint h4 = w[qh + k] >> s;
    for (uint j = 0; j < 4; ++j) {
      const float xv = X(xb + 4u * k + j);
      const uint q = ((q4 >> (8u * j)) & 15u) | (((h4 >> (8u * j)) & 1u) << 4);
      qsum += float(q) * xv;
      xsum += xv;
    }
  }
  return load_f16(off) * float(sc) * qsum - load_f16(off + 2u) * float(mn) * xsum;
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 176u;
  uint sc, mn;
  k_scale_min(off, s, sc, mn);
  const uint qs = (off + 48u + 32u * (s / 2u)) >> 2;
  const uint qh = (off + 16u) >> 2;
  const uint shift = (s & 1u) * 4u;
  const float a = load_f16(off) * float(sc), b = load_f16(off + 2u) * float(mn);
  for (uint k = 0; k < 8; ++k) {
    const uint q4 = w[qs + k] >> shift;
    const uint h4 = w[qh + k] >> s;
    for (uint j = 0; j < 4; ++j) {
      const uint q = ((q4 >> (8u * j)) & 15u) | (((h4 >> (8u * j)) & 1u) << 4);
      UNIT_OUT(4u * k + j, a * float(q) - b);
    }
  }
}
#endif
#endif
#elif defined(WEIGHT_Q6_K)
// 210 bytes per 256: ql[128] | qh[64] | scales[16] int8 | d f16; x = d * sc[i/16] * (q - 32).
// Unit s = 4h + j covers q[128h + 32j + l], l < 32: its low 4 bits are ql[64h + l] (j = 0),
// ql[64h + 32 + l] (1), the high nibbles of those (2, 3); its top 2 bits are bits 2j, 2j+1
// of qh[32h + l].
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint h = s / 4u, j = s % 4u;
  const uint off = row + (u / 8u) * 210u;
  const uint xb = x_base + u * 32u;
  const uint ql = off + 64u * h + 32u * (j & 1u);
  const uint ql_shift = (j / 2u) * 4u;
  const uint qh = off + 128u + 32u * h;
  float sums[2] = {0.0, 0.0};
  for (uint k = 0; k < 8; ++k) {
    const uint lo4 = load_u32(ql + 4u * k) >> ql_shift;
    const uint hi4 = load_u32(qh + 4u * k) >> (2u * j);
    for (uint b = 0; b < 4; ++b) {
      const uint q = ((lo4 >> (8u * b)) & 15u) | (((hi4 >> (8u * b)) & 3u) << 4);
      sums[k / 4u] += (float(q) - 32.0) * X(xb + 4u * k + b);
    }
  }
  const uint sc = off + 192u + 8u * h + 2u * j;
  return load_f16(off + 208u) * (float(load_i8(sc)) * sums[0] + float(load_i8(sc + 1u)) * sums[1]);
}
#ifdef UNIT_OUT
void unit_weights(uint row, uint u) {
  const uint s = u % 8u;
  const uint h = s / 4u, j = s % 4u;
  const uint off = row + (u / 8u) * 210u;
  const uint ql = off + 64u * h + 32u * (j & 1u);
  const uint ql_shift = (j / 2u) * 4u;
  const uint qh = off + 128u + 32u * h;
  const uint sc = off + 192u + 8u * h + 2u * j;
  const float d = load_f16(off + 208u);
  const float scales[2] = {d * float(load_i8(sc)), d * float(load_i8(sc + 1u))};
  for (uint k = 0; k < 8; ++k) {
    const uint lo4 = load_u32(ql + 4u * k) >> ql_shift;
    const uint hi4 = load_u32(qh + 4u * k) >> (2u * j);
    for (uint b = 0; b < 4; ++b) {
      const uint q = ((lo4 >> (8u * b)) & 15u) | (((hi4 >> (8u * b)) & 3u) << 4);
      UNIT_OUT(4u * k + b, scales[k / 4u] * (float(q) - 32.0));
    }
  }
}
#endif
#elif defined(WEIGHT_IQ2_XXS) || defined(WEIGHT_IQ2_XS) || defined(WEIGHT_IQ2_S) || \
    defined(WEIGHT_IQ3_XXS) || defined(WEIGHT_IQ3_S) || defined(WEIGHT_IQ1_S) ||        \
    defined(WEIGHT_IQ1_M)
// The grid types (quant/iq_grid_quants.h has the layouts): groups of 8 (IQ3: 4) weights are
// a row of a codebook, a byte per weight, weight j in bits 8j..8j+7. The type's codebook is
// a storage buffer at binding GRID_BINDING (the includer defines it), uploaded once by
// Kernels from quant/iq_grids.h: 64-bit rows as two words, low first. Not GLSL constants:
// a dynamically indexed constant array is copied into every invocation's registers or
// scratch on some drivers (lavapipe: seconds per dispatch for iq3_s's 2 KiB).
layout(std430, binding = GRID_BINDING) readonly buffer Grid { uint grid[]; };
uvec2 grid8(uint index) {
  return uvec2(grid[2u * index], grid[2u * index + 1u]);
}

// kIqSigns (ggml's ksigns_iq2xs) computed: the 7-bit index, bit 7 set where that makes the
// number of set bits even.
uint iq_signs(uint i) {
  return i | ((uint(bitCount(i)) & 1u) << 7);
}
// Magnitudes g (4 bytes) negated where bit j of `signs` is set, against X(xb + j).
float grid4_dot(uint g, uint signs, uint xb) {
  float sum = 0.0;
  for (uint j = 0; j < 4; ++j) {
    const float m = float((g >> (8u * j)) & 0xffu);
    sum += (((signs >> j) & 1u) != 0u ? -m : m) * X(xb + j);
  }
  return sum;
}
float grid8_dot(uvec2 g, uint signs, uint xb) {
  return grid4_dot(g.x, signs, xb) + grid4_dot(g.y, signs >> 4, xb + 4u);
}

#if defined(WEIGHT_IQ2_XXS)
// 66 bytes per 256: d f16 | per sub-block u 8 bytes: 4 grid indices, u32 of 4 x 7 sign bits
// and the scale s in bits 28-31; x = d / 8 * (2s + 1) * grid * sign.
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 66u;
  const uint xb = x_base + u * 32u;
  const uint idx4 = load_u32(off + 2u + 8u * s);
  const uint aux = load_u32(off + 6u + 8u * s);
  float sum = 0.0;
  for (uint l = 0; l < 4; ++l) {
    sum += grid8_dot(grid8((idx4 >> (8u * l)) & 0xffu), iq_signs((aux >> (7u * l)) & 127u),
                     xb + 8u * l);
  }
  return load_f16(off) * 0.125 * float(2u * (aux >> 28) + 1u) * sum;
}
#elif defined(WEIGHT_IQ2_XS) || defined(WEIGHT_IQ2_S)
// iq2_xs, 74 bytes per 256: d f16 | u16 per group of 8 (9-bit grid index, 7-bit sign index)
// | scales[8]; iq2_s, 82: d f16 | idx[32] | signs[32] | qh[8] (2 index bits per group) |
// scales[8]. x = d / 8 * (2s + 1) * grid * sign, s per 16 weights: scales[u] lo, then hi.
#if defined(WEIGHT_IQ2_XS)
const uint kBlock = 74u, kScales = 66u;
#else
const uint kBlock = 82u, kScales = 74u;
#endif
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * kBlock;
  const uint xb = x_base + u * 32u;
  float sums[2] = {0.0, 0.0};
#if defined(WEIGHT_IQ2_XS)
  for (uint l = 0; l < 4; ++l) {
    const uint v = load_u32(off + 2u + 8u * s + 4u * (l / 2u)) >> (16u * (l % 2u));
    sums[l / 2u] += grid8_dot(grid8(v & 511u), iq_signs((v >> 9) & 127u), xb + 8u * l);
  }
#else
  const uint idx4 = load_u32(off + 2u + 4u * s);
  const uint signs4 = load_u32(off + 34u + 4u * s);
  const uint qh = load_u8(off + 66u + s);
  for (uint l = 0; l < 4; ++l) {
    const uint index = ((idx4 >> (8u * l)) & 0xffu) | (((qh >> (2u * l)) & 3u) << 8);
    sums[l / 2u] += grid8_dot(grid8(index), signs4 >> (8u * l), xb + 8u * l);
  }
#endif
  const uint sc = load_u8(off + kScales + s);
  const float d = load_f16(off) * 0.125;
  return d * float(2u * (sc & 15u) + 1u) * sums[0] + d * float(2u * (sc >> 4) + 1u) * sums[1];
}
#elif defined(WEIGHT_IQ3_XXS)
// 98 bytes per 256: d f16 | idx[64], one per 4 weights | per sub-block a u32: 4 x 7 sign
// bits (per 8 weights), the scale s in bits 28-31; x = d / 4 * (2s + 1) * grid * sign.
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 98u;
  const uint xb = x_base + u * 32u;
  const uint aux = load_u32(off + 66u + 4u * s);
  float sum = 0.0;
  for (uint l = 0; l < 4; ++l) {
    const uint idx2 = load_u32(off + 2u + 8u * s + 4u * (l / 2u)) >> (16u * (l % 2u));
    const uint signs = iq_signs((aux >> (7u * l)) & 127u);
    sum += grid4_dot(grid[idx2 & 0xffu], signs, xb + 8u * l) +
           grid4_dot(grid[(idx2 >> 8) & 0xffu], signs >> 4, xb + 8u * l + 4u);
  }
  return load_f16(off) * 0.25 * float(2u * (aux >> 28) + 1u) * sum;
}
#elif defined(WEIGHT_IQ3_S)
// 110 bytes per 256: d f16 | idx[64] low 8 bits, one per 4 weights | qh[8]: bit 8 of idx
// | signs[32], a bit per weight | scales[4], s per sub-block; x = d * (2s + 1) * grid * sign.
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 110u;
  const uint xb = x_base + u * 32u;
  const uint qh = load_u8(off + 66u + s);
  const uint signs = load_u32(off + 74u + 4u * s);
  float sum = 0.0;
  for (uint h = 0; h < 2; ++h) {
    const uint idx4 = load_u32(off + 2u + 8u * s + 4u * h);
    for (uint j = 0; j < 4; ++j) {
      const uint q = 4u * h + j;  // the group of 4 in the unit
      const uint index = ((idx4 >> (8u * j)) & 0xffu) | (((qh >> q) & 1u) << 8);
      sum += grid4_dot(grid[index], signs >> (4u * q), xb + 4u * q);
    }
  }
  const uint sc = (load_u8(off + 106u + s / 2u) >> (4u * (s % 2u))) & 15u;
  return load_f16(off) * float(2u * sc + 1u) * sum;
}
#else
// IQ1: grid bytes are int8 -1, 0, +1; q = 8 * grid + delta (delta +-1 per group of 8), d / 8.
// Group l's sum_j q_j X(xb + j) = 8 * sum grid * X + delta * sum X.
float iq1_group_dot(uvec2 g, bool negative_delta, uint xb) {
  float gsum = 0.0, xsum = 0.0;
  for (uint j = 0; j < 8; ++j) {
    const uint word = j < 4u ? g.x : g.y;
    const float xv = X(xb + j);
    gsum += float(int(word << (24u - 8u * (j % 4u))) >> 24) * xv;
    xsum += xv;
  }
  return 8.0 * gsum + (negative_delta ? -xsum : xsum);
}
#if defined(WEIGHT_IQ1_S)
// 50 bytes per 256: d f16 | idx[32] low 8 bits | qh u16 per sub-block: 3 index bits per
// group, the scale s in bits 12-14, bit 15 delta -1/8; x = d * (2s + 1) * (grid + delta).
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint off = row + (u / 8u) * 50u;
  const uint xb = x_base + u * 32u;
  const uint idx4 = load_u32(off + 2u + 4u * s);
  const uint qh = load_u16(off + 34u + 2u * s);
  float sum = 0.0;
  for (uint l = 0; l < 4; ++l) {
    const uint index = ((idx4 >> (8u * l)) & 0xffu) | (((qh >> (3u * l)) & 7u) << 8);
    sum += iq1_group_dot(grid8(index), (qh & 0x8000u) != 0u, xb + 8u * l);
  }
  return load_f16(off) * 0.125 * float(2u * ((qh >> 12) & 7u) + 1u) * sum;
}
#else
// 56 bytes per 256: idx[32] low 8 bits | qh[16]: a nibble per group (3 index bits, delta
// bit) | 4 x u16 scales: 3 bits per 16 weights, and in bits 12-15 of each a quarter of d.
float unit_dot(uint row, uint u) {
  const uint s = u % 8u;
  const uint wb = (row + (u / 8u) * 56u) >> 2;  // word index (56 is 4-aligned)
  const uint xb = x_base + u * 32u;
  const uint idx4 = w[wb + s];
  const uint qh = load_u16(4u * wb + 32u + 2u * s);
  const uint sc01 = w[wb + 12u], sc23 = w[wb + 13u];
  const uint d_bits = ((sc01 >> 12) & 0xfu) | ((sc01 >> 24) & 0xf0u) | ((sc23 >> 4) & 0xf00u) |
                      ((sc23 >> 16) & 0xf000u);
  const uint sc = ((s < 4u ? sc01 : sc23) >> (16u * ((s / 2u) % 2u))) >> (6u * (s % 2u));
  float sums[2] = {0.0, 0.0};
  for (uint l = 0; l < 4; ++l) {
    const uint h = qh >> (4u * l);
    const uint index = ((idx4 >> (8u * l)) & 0xffu) | ((h & 7u) << 8);
    sums[l / 2u] += iq1_group_dot(grid8(index), (h & 8u) != 0u, xb + 8u * l);
  }
  const float d = unpackHalf2x16(d_bits).x * 0.125;
  return d * float(2u * (sc & 7u) + 1u) * sums[0] + d * float(2u * ((sc >> 3) & 7u) + 1u) * sums[1];
}
#endif
#endif
#endif
