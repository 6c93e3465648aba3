// NEON (dotprod) kernels of the grid-based types (iq_grid_simd.h): sdot per 16-weight
// sub-block, multiplied by its scale; decoding through quant's decoders. Compiled with
// -march=armv8.2-a+dotprod.
#include <arm_neon.h>

#include "kernels/iq_grid_kernels.h"
#include "kernels/iq_grid_simd.h"

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

template <typename Block, void (*kDecode)(const Block&, GridInts&)>
void gemm(const GemmArgs& a) {
  grid_gemm<Dot, GenericDecoder<Block, kDecode>>(a);
}

}  // namespace

size_t scratch_bytes(int64_t cols) {
  return decoded_scratch_bytes(cols);
}

void gemm_iq2_xxs(const GemmArgs& a) {
  gemm<BlockIQ2_XXS, decode_iq2_xxs>(a);
}
void gemm_iq2_xs(const GemmArgs& a) {
  gemm<BlockIQ2_XS, decode_iq2_xs>(a);
}
void gemm_iq2_s(const GemmArgs& a) {
  gemm<BlockIQ2_S, decode_iq2_s>(a);
}
void gemm_iq3_xxs(const GemmArgs& a) {
  gemm<BlockIQ3_XXS, decode_iq3_xxs>(a);
}
void gemm_iq3_s(const GemmArgs& a) {
  gemm<BlockIQ3_S, decode_iq3_s>(a);
}
void gemm_iq1_s(const GemmArgs& a) {
  gemm<BlockIQ1_S, decode_iq1_s>(a);
}
void gemm_iq1_m(const GemmArgs& a) {
  gemm<BlockIQ1_M, decode_iq1_m>(a);
}

}  // namespace herd::kernels::iq_grid::neon
