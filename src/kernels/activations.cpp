// The activation quantizers of the SIMD kernels (blocks in activations.h). Plain C++ for
// the baseline CPU; an ISA may bring a faster one that produces the same blocks.
#include "kernels/activations.h"

#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/float16.h"
#include "quant/k_quants.h"

namespace herd::kernels {

using quant::BlockQ8_K;
using quant::kQK;
using quant::kQK_K;

size_t act_offset_row_bytes(int64_t cols) {
  return size_t(cols / kQK) * sizeof(ActQ8Offset);
}
size_t act_k_row_bytes(int64_t cols) {
  return size_t(cols / kQK_K) * sizeof(ActQ8K);
}

namespace {

// roundf's halves-away-from-zero without a library call (as quant/legacy_quants.cpp does).
int round_half_away(float v) {
  int t = static_cast<int>(v);
  const float fraction = v - static_cast<float>(t);
  t += fraction >= 0.5f;
  t -= fraction <= -0.5f;
  return t;
}

// ggml's quantize_row_q8_0_ref for one block: returns d as stored (f16-rounded) and the
// sum of the values.
float quantize_block32(const float* x, int8_t* qs, int32_t* sum) {
  float amax = 0;
  for (int j = 0; j < kQK; ++j) {
    const float magnitude = std::fabs(x[j]);
    amax = magnitude > amax ? magnitude : amax;  // not std::fmax: that can be a libm call
  }
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  int32_t s = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = int8_t(round_half_away(x[j] * id));
    s += qs[j];
  }
  *sum = s;
  return fp16_to_fp32(fp32_to_fp16(d));
}

}  // namespace

template <int kOffset>
void quantize_act_offset(const float* x, int64_t cols, uint8_t* dst) {
  ActQ8Offset* out = reinterpret_cast<ActQ8Offset*>(dst);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int32_t sum;
    out[b].d = quantize_block32(x + b * kQK, out[b].qs, &sum);
    out[b].offset_sum = -kOffset * sum;
  }
}
template void quantize_act_offset<0>(const float*, int64_t, uint8_t*);
template void quantize_act_offset<8>(const float*, int64_t, uint8_t*);
template void quantize_act_offset<16>(const float*, int64_t, uint8_t*);
template void quantize_act_offset<128>(const float*, int64_t, uint8_t*);

void quantize_act_min(const float* x, int64_t cols, uint8_t* dst) {
  ActQ8Min* out = reinterpret_cast<ActQ8Min*>(dst);
  for (int64_t b = 0; b < cols / kQK; ++b) {
    int32_t sum;
    out[b].d = quantize_block32(x + b * kQK, out[b].qs, &sum);
    out[b].s = out[b].d * float(sum);
  }
}

void quantize_act_k(const float* x, int64_t cols, uint8_t* dst) {
  ActQ8K* out = reinterpret_cast<ActQ8K*>(dst);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    BlockQ8_K block;
    quant::quantize_row_q8_k(x + b * kQK_K, &block, kQK_K);
    std::memcpy(out[b].qs, block.qs, kQK_K);
    for (int j = 0; j < 16; ++j) out[b].bsum16[j] = block.bsums[j];
    for (int j = 0; j < 8; ++j)
      out[b].bsum32[j] = int16_t(block.bsums[2 * j] + block.bsums[2 * j + 1]);
    out[b].d = block.d;
    out[b].pad[0] = out[b].pad[1] = out[b].pad[2] = 0;
  }
}

size_t act_float_row_bytes(int64_t cols) {
  return size_t(cols) * sizeof(float);
}

void copy_act_f32(const float* x, int64_t cols, uint8_t* dst) {
  std::memcpy(dst, x, size_t(cols) * sizeof(float));
}

void round_act_bf16(const float* x, int64_t cols, uint8_t* dst) {
  float* out = reinterpret_cast<float*>(dst);
  for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

}  // namespace herd::kernels
