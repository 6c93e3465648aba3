// Weights for the shader tests: a row of any type the shaders read, from floats where the
// type table has a quantizer, else (the grid types iq1_s ... iq3_s, which herd only reads)
// random valid blocks: random bytes, so every grid index, sign and scale occurs, with each
// block's f16 scale set to a finite value of the row's magnitude (iq1_m spreads it over the
// top nibbles of its 4 scale words; the others store it in their first 2 bytes), as
// src/kernels/matmul_test.cpp's random_blocks. Compared against the type table's
// dequantize, random blocks test the decoding of every field directly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/float16.h"
#include "quant/types.h"

namespace herd::vulkan {

// REQUIRES: cols % block_size == 0; row holds row_bytes(type, cols), values cols floats of
// magnitude about row_scale (read only where the type has a quantizer).
inline void fill_row(TensorType type, const float* values, float row_scale, std::mt19937& rng,
                     uint8_t* row, int64_t cols) {
  const TypeTraits& traits = type_traits(type);
  if (traits.quantize != nullptr) {
    traits.quantize(values, row, cols);
    return;
  }
  std::uniform_real_distribution<float> magnitude(0.5f, 1.0f);
  for (int64_t b = 0; b < cols / traits.block_size; ++b) {
    uint8_t* block = row + size_t(b) * traits.block_bytes;
    for (size_t i = 0; i < traits.block_bytes; ++i) block[i] = uint8_t(rng());
    const uint16_t d = fp32_to_fp16(row_scale * magnitude(rng) / 32);
    if (type == TensorType::IQ1_M) {
      for (int m = 0; m < 4; ++m) {
        block[49 + 2 * m] = uint8_t((block[49 + 2 * m] & 0x0f) | ((d >> (4 * m)) & 15) << 4);
      }
    } else {
      std::memcpy(block, &d, 2);
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
