// NEON (dotprod) kernels of the grid-based types (iq_grid_simd.h): sdot per 16-weight
// sub-block, multiplied by its scale. IQ2_XXS and IQ3_S (the most used) have NEON decoders
// (sign bytes to lane masks with vtst, magnitudes biased with vbsl); the others decode
// through quant's decoders. Compiled with -march=armv8.2-a+dotprod.
#include <arm_neon.h>

#include <cstring>

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

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
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
  gemm<GenericDecoder<BlockIQ2_XS, decode_iq2_xs>>(a);
}
void gemm_iq2_s(const GemmArgs& a) {
  gemm<GenericDecoder<BlockIQ2_S, decode_iq2_s>>(a);
}
void gemm_iq3_xxs(const GemmArgs& a) {
  gemm<GenericDecoder<BlockIQ3_XXS, decode_iq3_xxs>>(a);
}
void gemm_iq3_s(const GemmArgs& a) {
  gemm<DecodeIQ3_S>(a);
}
void gemm_iq1_s(const GemmArgs& a) {
  gemm<GenericDecoder<BlockIQ1_S, decode_iq1_s>>(a);
}
void gemm_iq1_m(const GemmArgs& a) {
  gemm<GenericDecoder<BlockIQ1_M, decode_iq1_m>>(a);
}

}  // namespace herd::kernels::iq_grid::neon
