// Test weights of a type herd cannot write (the IQ grid types): random block bytes, so every
// grid index, sign and scale occurs, with each block's f16 scale set to a finite value of the
// row's magnitude (IQ1_M spreads it over the top nibbles of its 4 scale words; the others
// store it in their first 2 bytes). Compared against the type table's dequantize, such
// blocks test the decoding of every field. Shared by the CPU's and the Vulkan backend's
// product tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>

#include "quant/float16.h"
#include "quant/types.h"

namespace herd {

inline void random_blocks(TensorType type, float row_scale, std::mt19937& rng, uint8_t* row,
                          int64_t n_blocks) {
  const TypeTraits& traits = type_traits(type);
  std::uniform_real_distribution<float> magnitude(0.5f, 1.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
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

}  // namespace herd
