// Legacy block types. Each quantizer mirrors ggml's quantize_row_*_ref step by step: the
// same float operations in the same order (this file is compiled without FMA contraction,
// see CMakeLists.txt), the same truncating casts, the same f16 rounding of the scales.
// Changing an expression here, even to an algebraically equal one, can change bytes.
#include "quant/legacy_quants.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/float16.h"

namespace herd::quant {
namespace {

// The element of largest magnitude, with its sign; the first one wins a tie.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// ggml truncates with a C cast after adding 0.5 (or 8.5, 16.5): round half up for the
// non-negative values these sums always are.
int truncate(float v) {
  return static_cast<int>(v);
}

// roundf (halves away from zero) for |v| < 2^23, without the library call: v - trunc(v)
// is exact in that range. Adding 0.5 and truncating would be wrong for 0.49999997f.
int round_half_away(float v) {
  int t = static_cast<int>(v);
  const float fraction = v - static_cast<float>(t);
  if (fraction >= 0.5f) ++t;
  if (fraction <= -0.5f) --t;
  return t;
}

uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void store_u32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = uint8_t(v >> (8 * k));
}

}  // namespace

// ---- quantize ------------------------------------------------------------------------

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;  // the extreme element maps to q = 0
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, truncate(x[j] * id + 8.5f));
      const int q1 = std::min(15, truncate(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = uint8_t(q0 | q1 << 4);
    }
  }
}

void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, truncate((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, truncate((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = uint8_t(q0 | q1 << 4);
    }
  }
}

void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(31, truncate(x[j] * id + 16.5f));
      const int q1 = std::min(31, truncate(x[j + kQK / 2] * id + 16.5f));
      y[i].qs[j] = uint8_t((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= uint32_t(q0 >> 4 & 1) << j;
      qh |= uint32_t(q1 >> 4 & 1) << (j + kQK / 2);
    }
    store_u32(y[i].qh, qh);
  }
}

void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      // No clamp to 31 here, as in ggml: (x - min) * id never exceeds 31.5.
      const int q0 = truncate((x[j] - min) * id + 0.5f);
      const int q1 = truncate((x[j + kQK / 2] - min) * id + 0.5f);
      y[i].qs[j] = uint8_t((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= uint32_t(q0 >> 4 & 1) << j;
      qh |= uint32_t(q1 >> 4 & 1) << (j + kQK / 2);
    }
    store_u32(y[i].qh, qh);
  }
}

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = absmax(x, kQK) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    // roundf: halves away from zero (unlike nearest_int in the K-quants).
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(round_half_away(x[j] * id));
  }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = absmax(x, kQK) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = int8_t(round_half_away(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16(float(sum) * d);
  }
}

// ---- dequantize ----------------------------------------------------------------------

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float((x[i].qs[j] & 0x0f) - 8) * d;
      y[j + kQK / 2] = float((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(x[i].qs[j] & 0x0f) * d + m;
      y[j + kQK / 2] = float(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (x[i].qs[j] & 0x0f) | int(qh >> j & 1) << 4;
      const int q1 = (x[i].qs[j] >> 4) | int(qh >> (j + kQK / 2) & 1) << 4;
      y[j] = float(q0 - 16) * d;
      y[j + kQK / 2] = float(q1 - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    const uint32_t qh = load_u32(x[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (x[i].qs[j] & 0x0f) | int(qh >> j & 1) << 4;
      const int q1 = (x[i].qs[j] >> 4) | int(qh >> (j + kQK / 2) & 1) << 4;
      y[j] = float(q0) * d + m;
      y[j + kQK / 2] = float(q1) * d + m;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const BlockQ8_1* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = float(x[i].qs[j]) * d;
  }
}

}  // namespace herd::quant
