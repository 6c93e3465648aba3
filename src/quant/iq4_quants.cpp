// 4-bit non-linear types. The quantizers mirror the reference code step by step (the same
// float operations in the same order, compiled without FMA contraction, see
// CMakeLists.txt): changing an expression here, even to an algebraically equal one, can
// change bytes.
#include "quant/iq4_quants.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/float16.h"

namespace herd::quant {
namespace {

// Below this a group's values count as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22 (ggml's nearest_int; see k_quants.cpp).
int nearest_int(float v) {
  const float shifted = v + 12582912.f;
  return (std::bit_cast<int32_t>(shifted) & 0x007fffff) - 0x00400000;
}

// The index of the level nearest to x; a tie goes to the upper level, values beyond the
// ends to the end levels. (ggml's binary search best_index_int8 and ik_llama.cpp's lookup
// table best_index_iq4nl both compute exactly this.)
int nearest_level(const int8_t* levels, float x) {
  if (x <= levels[0]) return 0;
  if (x >= levels[15]) return 15;
  int lo = 0, hi = 15;  // levels[lo] <= x < levels[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < levels[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - float(levels[lo]) < float(levels[hi]) - x ? lo : hi;
}

// Sums of the weighted least-squares fit x ~ d * levels[L] for the indices chosen by the
// inverse scale id; writes L when asked.
struct Fit {
  float sumqx = 0;
  float sumq2 = 0;
};

Fit fit(const float* x, const float* weight, float id, uint8_t* L) {
  Fit f;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(kValuesIq4nl, id * x[j]);
    if (L != nullptr) L[j] = uint8_t(l);
    const float q = kValuesIq4nl[l];
    const float w = weight[j];
    f.sumqx += w * q * x[j];
    f.sumq2 += w * q * q;
  }
  return f;
}

// ik_llama.cpp's refinement: move the single index whose step along the error gradient is
// shortest, while that improves the fit. Updates d, best and L.
void refine(const float* x, const float* weight, Fit f, float* d, float* best, uint8_t* L) {
  const int8_t* v = kValuesIq4nl;
  for (int iter = 0; iter < 32 * 32; ++iter) {
    float min_step = std::numeric_limits<float>::infinity();
    int best_j = -1, dir = 0;
    for (int j = 0; j < 32; ++j) {
      const float w = weight[j];
      const float g = *d * w * (x[j] - *d * float(v[L[j]]));
      if (g > 0 && L[j] < 15) {
        const float step = float(v[L[j] + 1] - v[L[j]]) / g;
        if (step < min_step) {
          min_step = step;
          best_j = j;
          dir = 1;
        }
      } else if (g < 0 && L[j] > 0) {
        const float step = float(v[L[j] - 1] - v[L[j]]) / g;
        if (step < min_step) {
          min_step = step;
          best_j = j;
          dir = -1;
        }
      }
    }
    if (best_j < 0) break;
    const int from = v[L[best_j]], to = v[L[best_j] + dir];
    const float w = weight[best_j];
    const float new_sumqx = f.sumqx + w * x[best_j] * float(to - from);
    const float new_sumq2 = f.sumq2 + w * float(to * to - from * from);
    if (!(new_sumq2 > 0 && new_sumqx * new_sumqx > *best * new_sumq2)) break;
    f = {new_sumqx, new_sumq2};
    *d = f.sumqx / f.sumq2;
    *best = *d * f.sumqx;
    L[best_j] = uint8_t(L[best_j] + dir);
  }
}

// The best scale of one 32-value group (weights x^2), searching inverse scales
// (itry + level) / max for itry in -7..7; 0 for an all-zero group. L gets the indices of
// the kept fit (ik_llama.cpp only; ggml recomputes them from the final scale).
float group_scale(const float* x, uint8_t* L, Iq4Search search) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  const bool ik = search == Iq4Search::kIkLlama;
  constexpr int kTries = 7;
  float d = -max / kValuesIq4nl[0];
  Fit f = fit(x, weight, 1 / d, L);
  if (ik) {
    d = f.sumqx / f.sumq2;
  } else {
    d = f.sumq2 > 0 ? f.sumqx / f.sumq2 : 0.f;
  }
  float best = d * f.sumqx;
  Fit best_fit = f;
  auto try_scale = [&](float id) {
    const Fit t = fit(x, weight, id, nullptr);
    if (t.sumq2 > 0 && t.sumqx * t.sumqx > best * t.sumq2) {
      d = t.sumqx / t.sumq2;
      best = d * t.sumqx;
      best_fit = t;
      if (ik) fit(x, weight, id, L);
    }
  };
  for (int itry = -kTries; itry <= kTries; ++itry) {
    try_scale(float(itry + kValuesIq4nl[0]) / max);
    if (ik) try_scale(float(itry + kValuesIq4nl[15]) / max);
  }
  if (ik) refine(x, weight, best_fit, &d, &best, L);
  return d;
}

void pack_indices(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(L[j] | L[j + 16] << 4);
}

}  // namespace

// ---- quantize ------------------------------------------------------------------------

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n, Iq4Search search) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    uint8_t L[kQK];
    const float d = group_scale(x, L, search);
    y[i].d = fp32_to_fp16(d);
    // Indices from the unrounded scale, as the reference.
    const float id = d != 0 ? 1 / d : 0;
    for (int j = 0; j < kQK; ++j) L[j] = uint8_t(nearest_level(kValuesIq4nl, id * x[j]));
    pack_indices(L, y[i].qs);
  }
}

void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n, Iq4Search search) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float scales[8];
    float max_scale = 0, amax_scale = 0;
    for (int s = 0; s < 8; ++s) {
      uint8_t unused[32];
      scales[s] = group_scale(x + 32 * s, unused, search);
      if (std::fabs(scales[s]) > amax_scale) {
        amax_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    // The super-block scale maps the largest sub-block scale to -32.
    const float d = -max_scale / 32;
    y[i].d = fp32_to_fp16(d);
    const float id = d != 0 ? 1 / d : 0.f;
    y[i].scales_h = 0;
    for (int s = 0; s < 8; ++s) {
      int l = nearest_int(id * scales[s]);
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      const float dl = d * float(l);
      const float idl = dl != 0 ? 1 / dl : 0.f;
      uint8_t L[32];
      for (int j = 0; j < 32; ++j) L[j] = uint8_t(nearest_level(kValuesIq4nl, idl * x[32 * s + j]));
      pack_indices(L, y[i].qs + 16 * s);
      l += 32;
      if (s % 2 == 0) {
        y[i].scales_l[s / 2] = uint8_t(l & 15);
      } else {
        y[i].scales_l[s / 2] = uint8_t(y[i].scales_l[s / 2] | (l & 15) << 4);
      }
      y[i].scales_h = uint16_t(y[i].scales_h | (l >> 4) << (2 * s));
    }
  }
}

void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n) {
  quantize_row_iq4_nl(x, y, n, Iq4Search::kGgml);
}
void quantize_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n) {
  quantize_row_iq4_xs(x, y, n, Iq4Search::kGgml);
}

namespace {

// The first of the levels e * kValuesMxfp4[k] nearest to x (ggml's best_index_mxfp4).
int nearest_mxfp4(float x, float e) {
  int best = 0;
  float best_error = std::fabs(float(kValuesMxfp4[0]) * e - x);
  for (int k = 1; k < 16; ++k) {
    const float error = std::fabs(float(kValuesMxfp4[k]) * e - x);
    if (error < best_error) {
      best = k;
      best_error = error;
    }
  }
  return best;
}

}  // namespace

void quantize_row_mxfp4(const float* x, BlockMXFP4* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
    // The largest level, 12 (doubled 6), times 2^(e-128) is 1.5 * 2^(floor(log2 amax)):
    // amax lands between 8 and 16 level units. log2f as the reference calls it (an amax
    // just below a power of two can round up to it); exponents outside a byte, which the
    // reference's cast leaves undefined, are clamped.
    float e = amax > 0 ? std::floor(std::log2(amax)) - 2 + 127 : 0;
    e = e < 0 ? 0 : (e > 255 ? 255 : e);
    y[i].e = uint8_t(e);
    const float d = mxfp4_scale(y[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = nearest_mxfp4(x[j], d);
      const int hi = nearest_mxfp4(x[j + kQK / 2], d);
      y[i].qs[j] = uint8_t(lo | hi << 4);
    }
  }
}

// ---- dequantize ----------------------------------------------------------------------

void dequantize_row_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * float(kValuesIq4nl[x[i].qs[j] & 15]);
      y[j + kQK / 2] = d * float(kValuesIq4nl[x[i].qs[j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int s = 0; s < 8; ++s, y += 32) {
      const float dl = d * float(iq4_xs_scale(x[i], s));
      const uint8_t* qs = x[i].qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * float(kValuesIq4nl[qs[j] & 15]);
        y[j + 16] = dl * float(kValuesIq4nl[qs[j] >> 4]);
      }
    }
  }
}

void dequantize_row_mxfp4(const BlockMXFP4* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = mxfp4_scale(x[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(kValuesMxfp4[x[i].qs[j] & 15]) * d;
      y[j + kQK / 2] = float(kValuesMxfp4[x[i].qs[j] >> 4]) * d;
    }
  }
}

}  // namespace herd::quant
