// Row quantizers and dequantizers of the legacy 32-element block types (q4_0, q4_1, q5_0,
// q5_1, q8_0, q8_1). The quantizers are ggml's reference ones (quantize_row_*_ref, the
// code llama-quantize runs without an imatrix), so equal floats give equal bytes.
// REQUIRES (all): n % kQK == 0; x and y hold n elements / n / kQK blocks.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace herd::quant {

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t n);

}  // namespace herd::quant
