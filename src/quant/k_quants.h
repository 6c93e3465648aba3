// Row quantizers and dequantizers of the K-quant super-block types (q2_K ... q8_K).
// The quantizers are ggml's reference ones (quantize_row_*_ref: make_qkx2_quants for
// q2_K/q4_K/q5_K, make_q3_quants for q3_K, make_qx_quants for q6_K), the code that
// llama.cpp's llama-quantize runs when no importance matrix is given.
// REQUIRES (all): n % kQK_K == 0; x and y hold n elements / n / kQK_K blocks.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace herd::quant {

// Which reference q6_K follows. They differ only in the scale search of make_qx_quants:
// ik_llama.cpp (the fork that made the test models in shared/models) also tries scales
// of the opposite sign and then refines the quants greedily; its files are still
// standard q6_K, decoded by every reader.
enum class Q6KSearch {
  kGgml,     // llama.cpp / ggml: what the tensor-type table uses
  kIkLlama,  // ik_llama.cpp: to reproduce its files bit for bit
};

void quantize_row_q2_k(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_k(const float* x, BlockQ3_K* y, int64_t n);
void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t n,
                       Q6KSearch search = Q6KSearch::kGgml);
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n);

void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t n);
void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n);
void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t n);

// Sub-block j (0..7) of a q4_K/q5_K scales array: its 6-bit scale and 6-bit min.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = uint8_t((q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4);
    *min = uint8_t((q[j + 4] >> 4) | (q[j] >> 6) << 4);
  }
}

// Sub-block j (0..15) of a q3_K scales array: its signed 6-bit scale (-32..31).
inline int get_scale_k3(int j, const uint8_t* q) {
  const int low = j < 8 ? q[j] & 0x0f : q[j - 8] >> 4;
  const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | high << 4) - 32;
}

}  // namespace herd::quant
