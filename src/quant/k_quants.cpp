// K-quant types. The quantizers mirror ggml's reference code step by step: the scale
// searches, the float operations in the same order (compiled without FMA contraction, see
// CMakeLists.txt), nearest_int's rounding and the f16 rounding of the super-block scales
// before the final requantization. Changing an expression here, even to an algebraically
// equal one, can change bytes.
#include "quant/k_quants.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "quant/float16.h"

namespace herd::quant {
namespace {

// Below this a group's values count as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits. ggml uses this instead of lrintf; it must agree on
// ties, which roundf (ties away from zero) would not.
int nearest_int(float v) {
  const float shifted = v + 12582912.f;
  return (std::bit_cast<int32_t>(shifted) & 0x007fffff) - 0x00400000;
}

// Packs 256 2-bit values L (0..3) as q2_K/q3_K do: byte 32h+l of qs holds L[128h+l],
// L[128h+l+32], L[128h+l+64], L[128h+l+96] from bit 0 up.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] =
          uint8_t(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
  }
}

// ---- scale searches (ggml's make_*_quants) --------------------------------------------

// Symmetric quants L[i] in 0..2*nmax-1 (value L - nmax) for n values, weighted by x^2
// (ggml's rmse_type 1, no importance weights); returns the scale. Tries iscale =
// -(nmax + 0.1 is)/max for is in -9..9 and keeps the least-squares best.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, Q6KSearch search) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.f;
  }
  // sumlx and suml2 of the quantization with this inverse scale, writing L when asked.
  auto evaluate = [&](float iscale, float* sumlx, float* suml2, bool write) {
    *sumlx = 0;
    *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
      if (write) L[i] = int8_t(l + nmax);
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * float(l);
      *suml2 += w * float(l) * float(l);
    }
  };
  float sumlx, suml2;
  float iscale = float(-nmax) / max;
  evaluate(iscale, &sumlx, &suml2, true);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  float best_sumlx = sumlx, best_suml2 = suml2;
  const bool ik = search == Q6KSearch::kIkLlama;
  auto try_scale = [&](float candidate) {
    evaluate(candidate, &sumlx, &suml2, false);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      evaluate(candidate, &sumlx, &suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
      best_sumlx = sumlx;
      best_suml2 = suml2;
    }
  };
  for (int is = -9; is <= 9; ++is) {
    if (is == 0 && !ik) continue;
    try_scale(-(float(nmax) + 0.1f * float(is)) / max);
    if (ik) try_scale((float(nmax - 1) + 0.1f * float(is)) / max);
  }
  if (!ik) return scale;

  // ik_llama.cpp: move single quants by one step along the largest gradient of the
  // error while that improves the least-squares fit.
  sumlx = best_sumlx;
  suml2 = best_suml2;
  for (int iter = 0; iter < n * (2 * nmax - 1); ++iter) {
    float abs_gmax = 0, gmax = 0;
    int best_j = -1;
    for (int j = 0; j < n; ++j) {
      const float w = x[j] * x[j];
      const int l = L[j] - nmax;
      const float g = scale * w * (x[j] - scale * float(l));
      if ((g > 0 && l < nmax - 1) || (g < 0 && l > -nmax)) {
        const float ag = std::fabs(g);
        if (ag > abs_gmax) {
          abs_gmax = ag;
          gmax = g;
          best_j = j;
        }
      }
    }
    if (best_j < 0) break;
    float new_sumlx = sumlx, new_suml2 = suml2;
    const float w = x[best_j] * x[best_j];
    int l = L[best_j] - nmax;
    if (gmax > 0) {
      new_sumlx += w * x[best_j];
      new_suml2 += w * float(2 * l + 1);
      l += 1;
    } else {
      new_sumlx -= w * x[best_j];
      new_suml2 -= w * float(2 * l - 1);
      l -= 1;
    }
    if (!(new_suml2 > 0 && new_sumlx * new_sumlx > best * new_suml2)) break;
    sumlx = new_sumlx;
    suml2 = new_suml2;
    scale = sumlx / suml2;
    best = scale * sumlx;
    L[best_j] = int8_t(l + nmax);
  }
  return scale;
}

// Symmetric quants for q3_K's sub-blocks: L[i] in 0..2*nmax-1, weighted by x^2, refined
// by up to 5 passes of coordinate descent; returns the scale.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.f;
  }
  const float iscale = float(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = int8_t(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * float(L[i]);
      if (slx > 0) {
        float sl2 = suml2 - w * float(L[i]) * float(L[i]);
        int new_l = nearest_int(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * float(new_l);
          sl2 += w * float(new_l) * float(new_l);
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = int8_t(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quants L[i] in 0..nmax with x ~ scale * L - the_min, minimizing the
// weighted squared (or absolute, use_mad) error over iscale = (rmin + rdelta*is + nmax) /
// (max - min), is = 0..nstep, each refit by weighted least squares. Returns the scale;
// *the_min >= 0. Laux is scratch of n bytes.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t(0));
    *the_min = -min;
    return 0.f;
  }
  auto error_of = [&](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = float(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    const float diff = scale * float(L[i]) + min - x[i];
    best_error += weights[i] * error_of(diff);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * float(l);
      sum_l2 += w * float(l) * float(l);
      sum_xl += w * float(l) * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * float(Laux[i]) + this_min - x[i];
        cur_error += weights[i] * error_of(diff);
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// q4_K and q5_K share everything but the number of levels and the search range.
struct Kx2Params {
  int nmax;  // 15 for q4_K, 31 for q5_K
  float rmin;
  float rdelta;
  int nstep;
};

// Quantizes one 256-value super-block into d, dmin, the 12 packed scale bytes and the
// levels L[256] (0..nmax), as quantize_row_q4_K_ref / q5_K_ref do.
void quantize_superblock_kx2(const float* x, const Kx2Params& p, uint16_t* d_out,
                             uint16_t* dmin_out, uint8_t* scales_out, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  float max_scale = 0;  // the min is subtracted, so scales are positive
  float max_min = 0;
  for (int j = 0; j < kQK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, p.nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                 p.rmin, p.rdelta, p.nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kQK_K / 32; ++j) {
    // ggml stores nearest_int into a uint8_t before clamping: keep that wrap-around.
    const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = uint8_t((ls & 0x0f) | (lm & 0x0f) << 4);
      scales_out[j - 4] |= uint8_t((ls >> 4) << 6);
      scales_out[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  *d_out = fp32_to_fp16(max_scale / 63.f);
  *dmin_out = fp32_to_fp16(max_min / 63.f);
  // Requantize against the scales as they will be decoded.
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = fp16_to_fp32(*d_out) * float(sc);
    if (d == 0) continue;
    const float dm = fp16_to_fp32(*dmin_out) * float(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(p.nmax, l)));
    }
  }
}

}  // namespace

// ---- quantize ------------------------------------------------------------------------

void quantize_row_q2_k(const float* x, BlockQ2_K* y, int64_t n) {
  constexpr float kQ4Scale = 15.f;
  uint8_t L[kQK_K];
  uint8_t Laux[16];
  float weights[16];
  float mins[kQK_K / 16];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                   0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j)
        y[i].scales[j] = uint8_t(nearest_int(iscale * scales[j]));
      y[i].d = fp32_to_fp16(max_scale / kQ4Scale);
    } else {
      std::fill(y[i].scales, y[i].scales + kQK_K / 16, uint8_t(0));
      y[i].d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < kQK_K / 16; ++j) {
        y[i].scales[j] |= uint8_t(nearest_int(iscale * mins[j]) << 4);
      }
      y[i].dmin = fp32_to_fp16(max_min / kQ4Scale);
    } else {
      y[i].dmin = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * float(y[i].scales[j] & 0x0f);
      if (d == 0) continue;
      const float dm = fp16_to_fp32(y[i].dmin) * float(y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = uint8_t(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, y[i].qs);
  }
}

void quantize_row_q3_k(const float* x, BlockQ3_K* y, int64_t n) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < kQK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQK_K / 16; ++j) {
        // ggml keeps this in an int8_t: exact here, since |iscale * scales[j]| <= 32.
        int l = int8_t(nearest_int(iscale * scales[j]));
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8) {
          y[i].scales[j] = uint8_t(l & 0x0f);
        } else {
          y[i].scales[j - 8] |= uint8_t((l & 0x0f) << 4);
        }
        y[i].scales[j % 4 + 8] |= uint8_t((l >> 4) << (2 * (j / 4)));
      }
      y[i].d = fp32_to_fp16(1 / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * float(get_scale_k3(j, y[i].scales));
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-4, std::min(3, l)) + 4);
      }
    }
    // Bit 2 of each level goes to hmask (bit j/32 of byte j%32), the rest to qs.
    uint8_t low[kQK_K];
    std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
    for (int j = 0; j < kQK_K; ++j) {
      int l = L[j];
      if (l > 3) {
        y[i].hmask[j % 32] |= uint8_t(1 << (j / 32));
        l -= 4;
      }
      low[j] = uint8_t(l);
    }
    pack_2bit(low, y[i].qs);
  }
}

void quantize_row_q4_k(const float* x, BlockQ4_K* y, int64_t n) {
  const Kx2Params params{15, -1.f, 0.1f, 20};
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_superblock_kx2(x, params, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | L[j + l + 32] << 4);
    }
  }
}

void quantize_row_q5_k(const float* x, BlockQ5_K* y, int64_t n) {
  const Kx2Params params{31, -0.5f, 0.1f, 15};
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_superblock_kx2(x, params, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    uint8_t* ql = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, ql += 32) {
      const int bit = j / 32;  // element j+l sets bit `bit`, j+l+32 bit `bit + 1`
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[j + l];
        const int l2 = L[j + l + 32];
        y[i].qh[l] |= uint8_t((l1 >> 4) << bit | (l2 >> 4) << (bit + 1));
        ql[l] = uint8_t((l1 & 0x0f) | (l2 & 0x0f) << 4);
      }
    }
  }
}

void quantize_row_q6_k(const float* x, BlockQ6_K* y, int64_t n, Q6KSearch search) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, search);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      y[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = fp16_to_fp32(y[i].d) * float(y[i].scales[j]);
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l];
        const int q2 = L[j + l + 32];
        const int q3 = L[j + l + 64];
        const int q4 = L[j + l + 96];
        ql[l] = uint8_t((q1 & 0x0f) | (q3 & 0x0f) << 4);
        ql[l + 32] = uint8_t((q2 & 0x0f) | (q4 & 0x0f) << 4);
        qh[l] = uint8_t(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
      }
    }
  }
}

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0) {
      y[i].d = 0;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));  // ggml leaves them unwritten
      continue;
    }
    // -127, not -128: ggml's IQ2 dot products need |q| <= 127.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
      y[i].bsums[j] = int16_t(sum);
    }
    y[i].d = 1 / iscale;
  }
}

// ---- dequantize ----------------------------------------------------------------------

void dequantize_row_q2_k(const BlockQ2_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int sc = x[i].scales[e / 16];
      const int q = (x[i].qs[e / 128 * 32 + e % 32] >> (2 * (e % 128 / 32))) & 3;
      const float dl = d * float(sc & 0x0f);
      const float ml = min * float(sc >> 4);
      *y++ = dl * float(q) - ml;
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d_all = fp16_to_fp32(x[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      const float dl = d_all * float(get_scale_k3(e / 16, x[i].scales));
      const int low = (x[i].qs[e / 128 * 32 + e % 32] >> (2 * (e % 128 / 32))) & 3;
      const int high = (x[i].hmask[e % 32] >> (e / 32)) & 1;
      *y++ = dl * float(low - (high ? 0 : 4));
    }
  }
}

void dequantize_row_q4_k(const BlockQ4_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int j = 0; j < kQK_K / 32; j += 2, q += 32) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = min * float(m);
      get_scale_min_k4(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = min * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void dequantize_row_q5_k(const BlockQ5_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const float min = fp16_to_fp32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    for (int j = 0; j < kQK_K / 32; j += 2, ql += 32) {
      uint8_t sc, m;
      get_scale_min_k4(j, x[i].scales, &sc, &m);
      const float d1 = d * float(sc), m1 = min * float(m);
      get_scale_min_k4(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * float(sc), m2 = min * float(m);
      for (int l = 0; l < 32; ++l) {
        const int q = (ql[l] & 0x0f) | ((x[i].qh[l] >> j) & 1) << 4;
        *y++ = d1 * float(q) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int q = (ql[l] >> 4) | ((x[i].qh[l] >> (j + 1)) & 1) << 4;
        *y++ = d2 * float(q) - m2;
      }
    }
  }
}

void dequantize_row_q6_k(const BlockQ6_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(x[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      float* out = y + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32;
        const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
        const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        out[l] = d * float(sc[is]) * float(q1);
        out[l + 32] = d * float(sc[is + 2]) * float(q2);
        out[l + 64] = d * float(sc[is + 4]) * float(q3);
        out[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int j = 0; j < kQK_K; ++j) *y++ = x[i].d * float(x[i].qs[j]);
  }
}

}  // namespace herd::quant
