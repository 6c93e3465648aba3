// Weights for the shader tests: a row of any type the shaders read, from floats where the
// type table has a quantizer, else (the grid types iq1_s ... iq3_s, which herd only reads)
// random valid blocks: random bytes, so every grid index, sign and scale occurs, with each
// block's f16 scale set to a finite value of the row's magnitude (iq1_m spreads it over the
// top nibbles of its 4 scale words; the others store it in their first 2 bytes), as
// src/kernels/matmul_test.cpp's random_blocks. Compared against the type table's
// dequantize, random blocks test the decoding of every field directly.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>

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

}  // namespace herd::vulkan
