// The activation quantizers of the x86 ISA files, written once over an ISA's primitives
// (`Q`): the loops over blocks and the Q8_K bookkeeping are shared, the vector work of one
// block is the ISA's. The results are those of activations.cpp bit for bit
// (activations_test.cpp).
//
// Included only by the ISA files; internal linkage (an unnamed namespace), as panel_gemm.h.
//
// Q provides:
//   block32(x, qs, &sum): 32 floats like ggml's quantize_row_q8_0_ref (halves away from
//     zero); returns d as stored in f16, sets sum = sum(qs);
//   abs_max256(x): max |x[i]| over 256 floats;
//   first_of_magnitude256(x, m): the first x[i] with |x[i]| == m (m = abs_max256(x));
//   quantize32_k(x, iscale, qs, sums): 32 values min(127, nearest-even(x * iscale)) into
//     qs, sums[0], sums[1] = sums of the two halves of 16.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/activations.h"

namespace herd::kernels {
namespace {

template <class Q, int kOffset>
void quantize_offset(const float* x, int64_t cols, uint8_t* dst) {
  ActQ8Offset* out = reinterpret_cast<ActQ8Offset*>(dst);
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t sum;
    out[b].d = Q::block32(x + b * 32, out[b].qs, &sum);
    out[b].offset_sum = -kOffset * sum;
  }
}

template <class Q>
void quantize_min(const float* x, int64_t cols, uint8_t* dst) {
  ActQ8Min* out = reinterpret_cast<ActQ8Min*>(dst);
  for (int64_t b = 0; b < cols / 32; ++b) {
    int32_t sum;
    out[b].d = Q::block32(x + b * 32, out[b].qs, &sum);
    out[b].s = out[b].d * float(sum);
  }
}

// ggml's quantize_row_q8_K_ref: the scale comes from the first value of largest
// magnitude, with its sign; rounding to nearest even as its nearest_int.
template <class Q>
void quantize_k(const float* x, int64_t cols, uint8_t* dst) {
  ActQ8K* out = reinterpret_cast<ActQ8K*>(dst);
  for (int64_t b = 0; b < cols / 256; ++b, x += 256) {
    ActQ8K& a = out[b];
    const float amax = Q::abs_max256(x);
    if (amax == 0) {
      std::memset(&a, 0, sizeof(a));
      continue;
    }
    const float iscale = -127.f / Q::first_of_magnitude256(x, amax);
    for (int i = 0; i < 8; ++i) {
      int32_t sums[2];
      Q::quantize32_k(x + 32 * i, iscale, a.qs + 32 * i, sums);
      a.bsum16[2 * i] = int16_t(sums[0]);
      a.bsum16[2 * i + 1] = int16_t(sums[1]);
      a.bsum32[i] = int16_t(a.bsum16[2 * i] + a.bsum16[2 * i + 1]);
    }
    a.d = 1 / iscale;
    a.pad[0] = a.pad[1] = a.pad[2] = 0;
  }
}

}  // namespace
}  // namespace herd::kernels
