// Row quantizers and dequantizers of the 4-bit non-linear types: iq4_nl and iq4_xs (16
// levels of kValuesIq4nl, one scale per 32 values or 6-bit scales under one per 256) and
// mxfp4 (OCP microscaling FP4: E2M1 levels under a power-of-two scale per 32 values).
// Block layouts in blocks.h. The quantizers are the reference ones without an importance
// matrix (ggml's quantize_iq4_nl / quantize_iq4_xs with no quant weights, the path
// llama-quantize takes; quantize_row_mxfp4_ref). Checked on 2026-12-01 against ggml
// d99724f2's ggml-base, built locally (not part of the tests: nothing of ggml is built
// here): 4096 rows of 256 Gaussian values, block scales 2^-20..2^20, outliers and zero
// blocks, the same bytes for all three types. With Iq4Search::kIkLlama the frontier files
// are reproduced (iq4_model_test.cpp).
// REQUIRES (all): n a multiple of the block size (32; 256 for iq4_xs); x and y hold n
// elements / n / block size blocks.
#pragma once

#include <bit>
#include <cstdint>

#include "quant/blocks.h"

namespace herd::quant {

// The 16 levels of iq4_nl and iq4_xs (ggml's kvalues_iq4nl): part of the file format.
inline constexpr int8_t kValuesIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// The 16 E2M1 values of mxfp4, doubled so they are integers (ggml's kvalues_mxfp4); index
// 8, E2M1's -0, decodes to +0 as in the reference.
inline constexpr int8_t kValuesMxfp4[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// Which reference the iq4 scale search follows. ik_llama.cpp (which made the test models
// in shared/models/frontier) also tries scales anchored at the largest positive level and
// then moves single quants greedily while the least-squares fit improves; its files are
// plain iq4_nl / iq4_xs, decoded by every reader.
enum class Iq4Search {
  kGgml,     // llama.cpp / ggml: what the tensor-type table uses
  kIkLlama,  // ik_llama.cpp: to reproduce its files bit for bit
};

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n, Iq4Search search);
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n, Iq4Search search);
// Iq4Search::kGgml (the tensor-type table's rows).
void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n);
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n);
void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t n);

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n);
void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t n);

// The multiplier of an mxfp4 block with exponent byte e: 2^(e - 128), exact for every e
// (subnormal for e < 2), as ggml's GGML_E8M0_TO_FP32_HALF.
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : uint32_t(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Sub-block s (0..7) of an iq4_xs block: its scale ls - 32, in -32..31.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
  const int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 15;
  const int high = (b.scales_h >> (2 * s)) & 3;
  return (low | high << 4) - 32;
}

}  // namespace herd::quant
