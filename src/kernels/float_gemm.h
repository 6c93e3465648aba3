// The float-weight kernels (f32, f16, bf16), written once over an ISA's float primitives
// (`FOps`): a tile of kRM weight rows x kRN tokens keeps kRM * kRN vector accumulators
// along the row, so each weight vector loaded (and converted from f16 / bf16) serves kRN
// tokens and each activation vector kRM rows; horizontal sums happen once per output.
// These read the GGUF rows directly (no repacking): row-major halves are already what a
// vector load wants.
//
// FOps provides: V (kWidth floats), zero(), fma(a, b, c), hsum(V), and for Elem in
// {float, HalfBits, BrainBits}: load(const Elem*), load_partial(const Elem*, n) (zeros
// past n).
//
// Included only by the ISA files; internal linkage, as panel_gemm.h.
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/kernel_table.h"

namespace herd::kernels {
namespace {

struct HalfBits {  // one f16 value
  uint16_t bits;
};
struct BrainBits {  // one bf16 value
  uint16_t bits;
};

// y[j * y_stride + i] = row i of w . token j of x, for i < kRM, j < kRN.
// w: [kRM][cols] rows; x: [kRN][x_stride] floats.
template <class FOps, typename Elem, int kRM, int kRN>
void float_tile(const Elem* w, int64_t cols, const float* x, int64_t x_stride, float* y,
                int64_t y_stride) {
  typename FOps::V acc[kRM][kRN];
  for (int i = 0; i < kRM; ++i)
    for (int j = 0; j < kRN; ++j) acc[i][j] = FOps::zero();
  int64_t k = 0;
  for (; k + FOps::kWidth <= cols; k += FOps::kWidth) {
    typename FOps::V xv[kRN];
    for (int j = 0; j < kRN; ++j) xv[j] = FOps::load(x + j * x_stride + k);
    for (int i = 0; i < kRM; ++i) {
      const auto wv = FOps::load(w + i * cols + k);
      for (int j = 0; j < kRN; ++j) acc[i][j] = FOps::fma(wv, xv[j], acc[i][j]);
    }
  }
  if (k < cols) {
    const int n = int(cols - k);
    typename FOps::V xv[kRN];
    for (int j = 0; j < kRN; ++j) xv[j] = FOps::load_partial(x + j * x_stride + k, n);
    for (int i = 0; i < kRM; ++i) {
      const auto wv = FOps::load_partial(w + i * cols + k, n);
      for (int j = 0; j < kRN; ++j) acc[i][j] = FOps::fma(wv, xv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < kRM; ++i)
    for (int j = 0; j < kRN; ++j) y[j * y_stride + i] = FOps::hsum(acc[i][j]);
}

template <class FOps, typename Elem, int kRM, int kRN>
struct FloatGemm {
  static constexpr int kDecodeRows = 8;
  using TileFn = void (*)(const Elem*, int64_t, const float*, int64_t, float*, int64_t);

  template <int M>
  static TileFn pick_tokens(int rn) {
    TileFn fn = nullptr;
    [&]<int... N>(std::integer_sequence<int, N...>) {
      ((rn == N + 1 ? (void)(fn = &float_tile<FOps, Elem, M, N + 1>) : void()), ...);
    }
    (std::make_integer_sequence<int, kRN>{});
    return fn;
  }
  // The tile for an edge of rm rows x rn tokens (1 <= rm <= kRM, 1 <= rn <= kRN).
  static TileFn pick(int rm, int rn) {
    TileFn fn = nullptr;
    [&]<int... M>(std::integer_sequence<int, M...>) {
      ((rm == M + 1 ? (void)(fn = pick_tokens<M + 1>(rn)) : void()), ...);
    }
    (std::make_integer_sequence<int, kRM>{});
    return fn;
  }

  static void gemm(const GemmArgs& a) {
    const Elem* w = reinterpret_cast<const Elem*>(a.weights);
    const float* x = reinterpret_cast<const float*>(a.activations);
    const int64_t x_stride = int64_t(a.activation_stride / sizeof(float));
    int64_t r = a.row_begin;
    if (a.n_tokens == 1) {
      // Decode streams the weights from memory: more rows at once keep more loads and FMA
      // chains in flight (measured +10-20% for f16 over kRM = 4, docs/kernels.md).
      for (; r + kDecodeRows <= a.row_end; r += kDecodeRows) {
        float_tile<FOps, Elem, kDecodeRows, 1>(w + r * a.cols, a.cols, x, x_stride, a.y + r,
                                               a.y_stride);
      }
    }
    for (; r < a.row_end; r += kRM) {
      const int rm = int(a.row_end - r < kRM ? a.row_end - r : kRM);
      for (int64_t t = 0; t < a.n_tokens; t += kRN) {
        const int rn = int(a.n_tokens - t < kRN ? a.n_tokens - t : kRN);
        const TileFn fn = rm == kRM && rn == kRN ? &float_tile<FOps, Elem, kRM, kRN> : pick(rm, rn);
        fn(w + r * a.cols, a.cols, x + t * x_stride, x_stride, a.y + t * a.y_stride + r,
           a.y_stride);
      }
    }
  }
};

}  // namespace
}  // namespace herd::kernels
