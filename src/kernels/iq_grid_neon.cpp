// NEON (dotprod) kernels of the grid-based types (iq_grid_simd.h): sdot per 16-weight
// sub-block, multiplied by its scale. Every type has a NEON decoder that writes 16 biased
// weights per store: grid rows combined into one vector, sign bytes turned into lane masks
// with vtst and applied with vbsl (IQ2, IQ3), or IQ1's -1/0/+1 rows shifted to 8 * grid and
// offset by the delta and the bias. Compiled with -march=armv8.2-a+dotprod.
#include <arm_neon.h>

#include "kernels/iq_grid_kernels.h"
#include "kernels/iq_grid_simd.h"
#include "quant/float16.h"
#include "quant/iq_grids.h"

namespace herd::kernels::iq_grid::neon {
namespace {

using namespace quant;

struct Dot {
  static constexpr int kMaxTokens = 4;
  template <int T>
  static void run(const Decoded* w, int64_t n_blocks, const uint8_t* act, size_t stride, float* y,
                  int64_t y_stride) {
    float32x4_t acc[T];
    for (int t = 0; t < T; ++t) acc[t] = vdupq_n_f32(0);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Decoded& g = w[b];
      int32x4_t isum[T];
      for (int t = 0; t < T; ++t) isum[t] = vdupq_n_s32(0);
      for (int s = 0; s < 16; ++s) {
        // Biased weights are below 128: the same bytes read as signed.
        const int8x16_t q = vreinterpretq_s8_u8(vld1q_u8(g.q + 16 * s));
        for (int t = 0; t < T; ++t) {
          const int8x16_t x = vld1q_s8(act_block(act, stride, t, b).qs + 16 * s);
          isum[t] = vmlaq_n_s32(isum[t], vdotq_s32(vdupq_n_s32(0), q, x), g.scale[s]);
        }
      }
      for (int t = 0; t < T; ++t) {
        const ActQ8K& x = act_block(act, stride, t, b);
        int32x4_t bias = vdupq_n_s32(0);
        for (int h = 0; h < 4; ++h)
          bias = vmlal_s16(bias, vld1_s16(g.scale + 4 * h), vld1_s16(x.bsum16 + 4 * h));
        isum[t] = vsubq_s32(isum[t], vshlq_n_s32(bias, kBiasShift));
        acc[t] = vfmaq_n_f32(acc[t], vcvtq_f32_s32(isum[t]), g.d * x.d);
      }
    }
    for (int t = 0; t < T; ++t) y[t * y_stride] = vaddvq_f32(acc[t]);
  }
};

// ---- decoders ------------------------------------------------------------------------------

// 0xff in byte j where bit j of `signs` is set.
uint8x8_t sign_mask8(uint8_t signs) {
  return vtst_u8(vdup_n_u8(signs), vcreate_u8(0x8040201008040201ull));
}

// kBias + magnitude, or kBias - magnitude where `negative`.
uint8x16_t biased(uint8x16_t magnitude, uint8x16_t negative) {
  const uint8x16_t bias = vdupq_n_u8(kBias);
  return vbslq_u8(negative, vsubq_u8(bias, magnitude), vaddq_u8(bias, magnitude));
}

struct DecodeIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d) * 0.125f;
    for (int k = 0; k < 8; ++k) {
      const uint8_t* idx = b.qs + 8 * k;
      const uint32_t aux = load_u32(idx + 4);
      for (int p = 0; p < 2; ++p) {  // groups 2p, 2p + 1
        const uint8x16_t magnitude = vcombine_u8(vcreate_u8(kIq2xxsGrid[idx[2 * p]]),
                                                 vcreate_u8(kIq2xxsGrid[idx[2 * p + 1]]));
        const uint8x16_t negative = vcombine_u8(sign_mask8(kIqSigns[(aux >> (14 * p)) & 127]),
                                                sign_mask8(kIqSigns[(aux >> (14 * p + 7)) & 127]));
        vst1q_u8(out.q + 32 * k + 16 * p, biased(magnitude, negative));
      }
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * (aux >> 28) + 1);
    }
  }
};

struct DecodeIQ3_S {
  using Block = BlockIQ3_S;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d);
    for (int h = 0; h < 16; ++h) {  // 16 weights: groups of 4 q = 4h..4h+3
      uint32_t rows[4];
      for (int i = 0; i < 4; ++i) {
        const int q = 4 * h + i;
        rows[i] = kIq3sGrid[b.qs[q] | ((b.qh[q / 8] >> (q % 8)) & 1) << 8];
      }
      const uint8x16_t magnitude = vreinterpretq_u8_u32(vld1q_u32(rows));
      const uint8x16_t negative =
          vcombine_u8(sign_mask8(b.signs[2 * h]), sign_mask8(b.signs[2 * h + 1]));
      vst1q_u8(out.q + 16 * h, biased(magnitude, negative));
    }
    for (int k = 0; k < 8; ++k) {
      const int s = (b.scales[k / 2] >> (4 * (k % 2))) & 15;
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * s + 1);
    }
  }
};

// The 16 scales of the types with a 4-bit s per 16 weights, two per byte (iq2_xs, iq2_s).
void nibble_scales(const uint8_t* scales, Decoded& out) {
  for (int k = 0; k < 8; ++k) {
    out.scale[2 * k] = int16_t(2 * (scales[k] & 15) + 1);
    out.scale[2 * k + 1] = int16_t(2 * (scales[k] >> 4) + 1);
  }
}

// Two 8-weight groups of 8-byte grid rows, negated by their sign bytes.
uint8x16_t signed_pair(uint64_t row0, uint64_t row1, uint8_t signs0, uint8_t signs1) {
  return biased(vcombine_u8(vcreate_u8(row0), vcreate_u8(row1)),
                vcombine_u8(sign_mask8(signs0), sign_mask8(signs1)));
}

struct DecodeIQ2_XS {
  using Block = BlockIQ2_XS;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d) * 0.125f;
    for (int h = 0; h < 16; ++h) {  // groups 2h, 2h + 1: 9-bit grid index, 7-bit sign index
      const uint16_t v0 = load_u16(b.qs + 4 * h), v1 = load_u16(b.qs + 4 * h + 2);
      vst1q_u8(out.q + 16 * h, signed_pair(kIq2xsGrid[v0 & 511], kIq2xsGrid[v1 & 511],
                                           kIqSigns[v0 >> 9], kIqSigns[v1 >> 9]));
    }
    nibble_scales(b.scales, out);
  }
};

struct DecodeIQ2_S {
  using Block = BlockIQ2_S;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d) * 0.125f;
    const uint8_t* idx = b.qs;
    const uint8_t* signs = b.qs + 32;
    for (int h = 0; h < 16; ++h) {  // groups 2h, 2h + 1: 2 high index bits each in qh
      const int high = b.qh[h / 2] >> (4 * (h % 2));
      vst1q_u8(out.q + 16 * h, signed_pair(kIq2sGrid[idx[2 * h] | (high & 3) << 8],
                                           kIq2sGrid[idx[2 * h + 1] | (high >> 2 & 3) << 8],
                                           signs[2 * h], signs[2 * h + 1]));
    }
    nibble_scales(b.scales, out);
  }
};

struct DecodeIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d) * 0.25f;
    for (int k = 0; k < 8; ++k) {
      const uint32_t aux = load_u32(b.qs + 64 + 4 * k);
      for (int p = 0; p < 2; ++p) {  // weights 32k + 16p..+15: 4 rows of 4, 2 sign indices
        const uint8_t* idx = b.qs + 8 * k + 4 * p;
        const uint32_t rows[4] = {kIq3xxsGrid[idx[0]], kIq3xxsGrid[idx[1]], kIq3xxsGrid[idx[2]],
                                  kIq3xxsGrid[idx[3]]};
        const uint8x16_t negative = vcombine_u8(sign_mask8(kIqSigns[(aux >> (14 * p)) & 127]),
                                                sign_mask8(kIqSigns[(aux >> (14 * p + 7)) & 127]));
        vst1q_u8(out.q + 32 * k + 16 * p, biased(vreinterpretq_u8_u32(vld1q_u32(rows)), negative));
      }
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * (aux >> 28) + 1);
    }
  }
};

// IQ1: 16 weights of two rows of -1/0/+1 bytes as kBias + 8 * grid + delta (delta +-1 per
// row: the +-1/8 of the reference, d carries the 1/8).
uint8x16_t iq1_pair(uint64_t row0, uint64_t row1, int delta0, int delta1) {
  const int8x16_t grid = vcombine_s8(vcreate_s8(row0), vcreate_s8(row1));
  const int8x16_t offset =
      vcombine_s8(vdup_n_s8(int8_t(kBias + delta0)), vdup_n_s8(int8_t(kBias + delta1)));
  return vreinterpretq_u8_s8(vaddq_s8(vshlq_n_s8(grid, 3), offset));
}

struct DecodeIQ1_S {
  using Block = BlockIQ1_S;
  static void decode(const Block& b, Decoded& out) {
    out.d = fp16_to_fp32(b.d) * 0.125f;
    for (int k = 0; k < 8; ++k) {
      const uint16_t qh = b.qh[k];
      const int delta = qh & 0x8000 ? -1 : 1;
      for (int p = 0; p < 2; ++p) {  // groups 4k + 2p, 4k + 2p + 1
        const int l = 2 * p;
        const int i0 = b.qs[4 * k + l] | ((qh >> (3 * l)) & 7) << 8;
        const int i1 = b.qs[4 * k + l + 1] | ((qh >> (3 * l + 3)) & 7) << 8;
        vst1q_u8(out.q + 32 * k + 16 * p, iq1_pair(kIq1sGrid[i0], kIq1sGrid[i1], delta, delta));
      }
      out.scale[2 * k] = out.scale[2 * k + 1] = int16_t(2 * ((qh >> 12) & 7) + 1);
    }
  }
};

struct DecodeIQ1_M {
  using Block = BlockIQ1_M;
  static void decode(const Block& b, Decoded& out) {
    uint16_t sc[4];
    for (int m = 0; m < 4; ++m) sc[m] = load_u16(b.scales + 2 * m);
    const uint16_t d_bits =
        uint16_t((sc[0] >> 12) | (sc[1] >> 8 & 0x00f0) | (sc[2] >> 4 & 0x0f00) | (sc[3] & 0xf000));
    out.d = fp16_to_fp32(d_bits) * 0.125f;
    for (int h = 0; h < 16; ++h) {  // groups 2h (qh bits 0-3) and 2h + 1 (bits 4-7)
      const int qh = b.qh[h];
      vst1q_u8(out.q + 16 * h, iq1_pair(kIq1sGrid[b.qs[2 * h] | (qh & 7) << 8],
                                        kIq1sGrid[b.qs[2 * h + 1] | (qh >> 4 & 7) << 8],
                                        qh & 8 ? -1 : 1, qh & 0x80 ? -1 : 1));
    }
    for (int j = 0; j < 16; ++j) out.scale[j] = int16_t(2 * ((sc[j / 4] >> (3 * (j % 4))) & 7) + 1);
  }
};

template <class Decoder>
void gemm(const GemmArgs& a) {
  grid_gemm<Dot, Decoder>(a);
}

}  // namespace

size_t scratch_bytes(int64_t cols) {
  return decoded_scratch_bytes(cols);
}

void gemm_iq2_xxs(const GemmArgs& a) {
  gemm<DecodeIQ2_XXS>(a);
}
void gemm_iq2_xs(const GemmArgs& a) {
  gemm<DecodeIQ2_XS>(a);
}
void gemm_iq2_s(const GemmArgs& a) {
  gemm<DecodeIQ2_S>(a);
}
void gemm_iq3_xxs(const GemmArgs& a) {
  gemm<DecodeIQ3_XXS>(a);
}
void gemm_iq3_s(const GemmArgs& a) {
  gemm<DecodeIQ3_S>(a);
}
void gemm_iq1_s(const GemmArgs& a) {
  gemm<DecodeIQ1_S>(a);
}
void gemm_iq1_m(const GemmArgs& a) {
  gemm<DecodeIQ1_M>(a);
}

}  // namespace herd::kernels::iq_grid::neon
