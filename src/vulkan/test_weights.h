// Weights and references for the shader tests: a row of any type the shaders read, from
// floats where the type table has a quantizer, else (the grid types iq1_s ... iq3_s, which
// herd only reads) random valid blocks (quant/random_blocks.h); the products in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "quant/random_blocks.h"
#include "quant/types.h"

namespace herd::vulkan {

// REQUIRES: cols % block_size == 0; row holds row_bytes(type, cols), values cols floats of
// magnitude about row_scale (read only where the type has a quantizer).
inline void fill_row(TensorType type, const float* values, float row_scale, std::mt19937& rng,
                     uint8_t* row, int64_t cols) {
  const TypeTraits& traits = type_traits(type);
  if (traits.quantize != nullptr) {
    traits.quantize(values, row, cols);
  } else {
    random_blocks(type, row_scale, rng, row, cols / traits.block_size);
  }
}

// y = W x in double for n_tokens tokens, the reference of matvec and matmul: want[t][r] =
// sum_c W[r][c] x[t][c] and scale[t][r] = sum_c |W x| (the tolerance's unit). w: [rows][cols]
// dequantized; x: [n_tokens][cols]. Appends to want and scale.
inline void product_reference(const std::vector<float>& w, const std::vector<float>& x,
                              int64_t rows, int64_t cols, int64_t n_tokens,
                              std::vector<double>& want, std::vector<double>& scale) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, abs_sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double product = double(w[size_t(r * cols + c)]) * x[size_t(t * cols + c)];
        sum += product;
        abs_sum += std::fabs(product);
      }
      want.push_back(sum);
      scale.push_back(abs_sum);
    }
  }
}

// The experts' products in double, the reference of matvec_experts and matmul_experts: for
// each slot (token t, choice j) and row r, want = sum_c W[ids[slot]][r][c] x[c] and scale =
// sum_c |W x| (the tolerance's unit). w: [n_expert * rows][cols] dequantized; x:
// [n_tokens][cols], or per slot [n_tokens * n_used][cols]; ids: [slots]; want, scale:
// [slots][rows].
inline void expert_reference(const std::vector<float>& w, const std::vector<float>& x,
                             const int32_t* ids, int64_t rows, int64_t cols, int64_t n_tokens,
                             int64_t n_used, bool per_slot, std::vector<double>& want,
                             std::vector<double>& scale) {
  want.clear();
  scale.clear();
  for (int64_t slot = 0; slot < n_tokens * n_used; ++slot) {
    const float* xs = &x[size_t((per_slot ? slot : slot / n_used) * cols)];
    for (int64_t r = 0; r < rows; ++r) {
      const float* wr = &w[size_t((int64_t(ids[slot]) * rows + r) * cols)];
      double sum = 0, abs_sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        sum += double(wr[c]) * xs[c];
        abs_sum += std::fabs(double(wr[c]) * xs[c]);
      }
      want.push_back(sum);
      scale.push_back(abs_sum);
    }
  }
}

}  // namespace herd::vulkan
