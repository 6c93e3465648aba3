// Activation rows as the SIMD kernels read them: one token's floats quantized per block
// like ggml's Q8_0 / Q8_1 / Q8_K (the same int8 values and scales the scalar kernels use),
// plus the block sums that the panels' folded offsets and mins need; or floats for the
// float weight types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace herd::kernels {

// One token's activations, quantized like ggml's Q8_0 / Q8_1 / Q8_K (same int8 values and
// scales), with the block sums the panels' folded offsets need.

// For weights x = d * (q - offset): the kernel starts each block's integer sum at
// offset_sum = -offset * sum(qs), so that it ends at sum((q - offset) * qs).
//   0       4                 8             40
//   | d f32 | offset_sum i32  | qs[32] int8 |
struct ActQ8Offset {
  float d;
  int32_t offset_sum;
  int8_t qs[32];
};
static_assert(sizeof(ActQ8Offset) == 40);

// For weights x = d * q + m: s = d * sum(qs) multiplies m.
//   0       4       8             40
//   | d f32 | s f32 | qs[32] int8 |
struct ActQ8Min {
  float d;
  float s;
  int8_t qs[32];
};
static_assert(sizeof(ActQ8Min) == 40);

// For K-quants (Q8_K values):
//   0              256                 288                304      320
//   | qs[256] int8 | bsum16[16] i16    | bsum32[8] i16     | d f32  | pad |
// bsum16[j] = sum of qs[16j..16j+15], bsum32[j] = sum of qs[32j..32j+31].
struct ActQ8K {
  int8_t qs[256];
  int16_t bsum16[16];
  int16_t bsum32[8];
  float d;
  float pad[3];
};
static_assert(sizeof(ActQ8K) == 320);

// ---- quantizers (activations.cpp) ---------------------------------------------------------
// Each turns one token row of `cols` floats into its row of blocks at dst.
// REQUIRES: cols a multiple of the block size (32 or 256).

size_t act_offset_row_bytes(int64_t cols);  // ActQ8Offset and ActQ8Min: 40 bytes per 32
size_t act_k_row_bytes(int64_t cols);       // ActQ8K: 320 bytes per 256
size_t act_float_row_bytes(int64_t cols);   // floats

template <int kOffset>
void quantize_act_offset(const float* x, int64_t cols, uint8_t* dst);
void quantize_act_min(const float* x, int64_t cols, uint8_t* dst);
void quantize_act_k(const float* x, int64_t cols, uint8_t* dst);
void copy_act_f32(const float* x, int64_t cols, uint8_t* dst);
// Rounded to bf16 and stored as floats (for bf16 weights, as ggml rounds them).
void round_act_bf16(const float* x, int64_t cols, uint8_t* dst);

}  // namespace herd::kernels
