// The scalar reference kernels of the grid-based types: each weight row decoded block by
// block to integers (quant::GridInts: x = d * scale[i / 16] * q[i]), then every token
// against it. Numerics follow ggml's vec_dot_iq*_q8_K: per super-block an exact integer sum
//   isum = sum_s scale_s * sum_{i in s} q_i * x_i
// times d_w * d_x, accumulated in float. (ggml applies the type's constant factor, 1/8 or
// 1/4, once per row; here it is part of d_w: a power of two, so the same products.)
#include "kernels/activations.h"
#include "kernels/iq_grid_kernels.h"
#include "quant/iq_grid_quants.h"

namespace herd::kernels::iq_grid::scalar {
namespace {

using namespace quant;

float dot(const GridInts* w, const ActQ8K* x, int64_t n_blocks) {
  float sum = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t isum = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t sub = 0;
      for (int i = 16 * s; i < 16 * s + 16; ++i) sub += int32_t(w[b].q[i]) * x[b].qs[i];
      isum += int32_t(w[b].scale[s]) * sub;
    }
    sum += w[b].d * x[b].d * float(isum);
  }
  return sum;
}

template <typename Block, void (*kDecode)(const Block&, GridInts&)>
void gemm(const GemmArgs& a) {
  const int64_t n_blocks = a.cols / kQK_K;
  const size_t row_stride = size_t(n_blocks) * sizeof(Block);
  GridInts* row = reinterpret_cast<GridInts*>(a.scratch);  // [n_blocks]
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const Block* blocks = reinterpret_cast<const Block*>(a.weights + size_t(r) * row_stride);
    for (int64_t b = 0; b < n_blocks; ++b) kDecode(blocks[b], row[b]);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const ActQ8K* x =
          reinterpret_cast<const ActQ8K*>(a.activations + size_t(t) * a.activation_stride);
      a.y[t * a.y_stride + r] = dot(row, x, n_blocks);
    }
  }
}

}  // namespace

size_t scratch_bytes(int64_t cols) {
  return size_t(cols / kQK_K) * sizeof(GridInts);
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

}  // namespace herd::kernels::iq_grid::scalar
