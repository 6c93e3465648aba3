// The SIMD attention kernel (and the FFN's SiLU product), written once over an ISA's float vector
// primitives (`V`, see attention_avx512.cpp for the list); attention_avx2.cpp and
// attention_avx512.cpp instantiate it with their own compiler flags. F16 keys and values are
// widened on load, four positions per step for independent FMA chains, and the softmax uses a
// vector exp.
//
// Included only by the ISA files; everything here has internal linkage (an unnamed
// namespace), as in panel_gemm.h, so each ISA file gets its own copy.
//
// V provides, for kWidth floats per vector F:
//   zero(); set1(f); load(p); store(p, v); load_f16(p): kWidth halves to F;
//   add, sub, mul, max; fma(a, b, c) = a * b + c; reduce_add(v), reduce_max(v);
//   neg_abs(v) = -|v|; div(a, b); if_nonnegative(v, a, b) = v >= 0 ? a : b per lane;
//   round(v) to the nearest integer; scale2(p, n) = p * 2^n for integral n (exp_nonpositive).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace herd::kernels {
namespace {

// e^x for x <= 0 (softmax arguments after subtracting the maximum): x = n ln2 + r with
// |r| <= ln2 / 2, e^r by its degree-6 Taylor polynomial (relative error < 2e-7), times 2^n
// (V::scale2: p * 2^n for integral n).
template <class V>
inline typename V::F exp_nonpositive(typename V::F x) {
  x = V::max(x, V::set1(-87.0f));
  const auto n = V::round(V::mul(x, V::set1(1.44269504f)));
  auto r = V::fma(n, V::set1(-0.693145752f), x);  // ln2 split in two
  r = V::fma(n, V::set1(-1.42860677e-06f), r);
  auto p = V::set1(1.0f / 720);
  p = V::fma(p, r, V::set1(1.0f / 120));
  p = V::fma(p, r, V::set1(1.0f / 24));
  p = V::fma(p, r, V::set1(1.0f / 6));
  p = V::fma(p, r, V::set1(0.5f));
  p = V::fma(p, r, V::set1(1.0f));
  p = V::fma(p, r, V::set1(1.0f));
  return V::scale2(p, n);
}

// x = silu(x) * up. With e = e^-|x| (never overflows): sigmoid(x) = 1 / (1 + e) for
// x >= 0, e / (1 + e) below; the last n % kWidth values as the scalar kernel.
template <class V>
void silu_mul_with(float* x, const float* up, int64_t n) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  int64_t i = 0;
  for (; i + w <= n; i += w) {
    const F v = V::load(x + i);
    const F e = exp_nonpositive<V>(V::neg_abs(v));
    const F sigmoid = V::div(V::if_nonnegative(v, V::set1(1.0f), e), V::add(V::set1(1.0f), e));
    V::store(x + i, V::mul(V::mul(v, sigmoid), V::load(up + i)));
  }
  for (; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
}

// Softmax weights of scores[0, n_pos) in place (unnormalized: e^(s - max)); returns their sum.
template <class V>
float softmax_weights(float* scores, int64_t n_pos) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  int64_t j = 0;
  F vmax = V::set1(-INFINITY);
  for (; j + w <= n_pos; j += w) vmax = V::max(vmax, V::load(scores + j));
  float max = V::reduce_max(vmax);
  for (; j < n_pos; ++j) max = std::max(max, scores[j]);
  const F m = V::set1(max);
  F vsum = V::zero();
  for (j = 0; j + w <= n_pos; j += w) {
    const F e = exp_nonpositive<V>(V::sub(V::load(scores + j), m));
    V::store(scores + j, e);
    vsum = V::add(vsum, e);
  }
  float sum = V::reduce_add(vsum);
  if (j < n_pos) {
    // The last n_pos - j < kWidth scores through a copy padded with the maximum (whose e^0
    // is neither stored nor summed).
    float tail[w];
    std::fill(tail, tail + w, max);
    std::copy(scores + j, scores + n_pos, tail);
    V::store(tail, exp_nonpositive<V>(V::sub(V::load(tail), m)));
    for (int64_t i = 0; j + i < n_pos; ++i) sum += scores[j + i] = tail[i];
  }
  return sum;
}

// One query head: scores four keys at a time (four independent FMA chains).
template <class V>
void attend_one(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
                int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  const int64_t nv = head_dim / w;
  F qv[256 / w];
  for (int64_t i = 0; i < nv; ++i) qv[i] = V::mul(V::load(q + w * i), V::set1(scale));

  int64_t j = 0;
  for (; j + 4 <= n_pos; j += 4) {
    const uint16_t* k = keys + j * stride;
    F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < nv; ++i) {
      a0 = V::fma(qv[i], V::load_f16(k + w * i), a0);
      a1 = V::fma(qv[i], V::load_f16(k + stride + w * i), a1);
      a2 = V::fma(qv[i], V::load_f16(k + 2 * stride + w * i), a2);
      a3 = V::fma(qv[i], V::load_f16(k + 3 * stride + w * i), a3);
    }
    scores[j] = V::reduce_add(a0);
    scores[j + 1] = V::reduce_add(a1);
    scores[j + 2] = V::reduce_add(a2);
    scores[j + 3] = V::reduce_add(a3);
  }
  for (; j < n_pos; ++j) {
    const uint16_t* k = keys + j * stride;
    F a = V::zero();
    for (int64_t i = 0; i < nv; ++i) a = V::fma(qv[i], V::load_f16(k + w * i), a);
    scores[j] = V::reduce_add(a);
  }
  const F inv = V::set1(1.0f / softmax_weights<V>(scores, n_pos));

  F acc[256 / w];
  for (int64_t i = 0; i < nv; ++i) acc[i] = V::zero();
  for (j = 0; j < n_pos; ++j) {
    const F p = V::set1(scores[j]);
    const uint16_t* v = values + j * stride;
    for (int64_t i = 0; i < nv; ++i) acc[i] = V::fma(p, V::load_f16(v + w * i), acc[i]);
  }
  for (int64_t i = 0; i < nv; ++i) V::store(out + w * i, V::mul(acc[i], inv));
}

// NQ query heads that share a KV head: each key and value row is widened from F16 once
// for all of them (grouped-query attention reads a KV head for several query heads).
// q, out: [NQ][head_dim]; scores: [NQ][n_pos].
template <class V, int NQ>
void attend_shared(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
                   int64_t n_pos, int64_t head_dim, float scale, float* scores, float* out) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  const int64_t nv = head_dim / w;
  F qv[NQ][256 / w];
  for (int h = 0; h < NQ; ++h) {
    for (int64_t i = 0; i < nv; ++i)
      qv[h][i] = V::mul(V::load(q + h * head_dim + w * i), V::set1(scale));
  }
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* k = keys + j * stride;
    F a[NQ];
    for (int h = 0; h < NQ; ++h) a[h] = V::zero();
    for (int64_t i = 0; i < nv; ++i) {
      const F kv = V::load_f16(k + w * i);
      for (int h = 0; h < NQ; ++h) a[h] = V::fma(qv[h][i], kv, a[h]);
    }
    for (int h = 0; h < NQ; ++h) scores[h * n_pos + j] = V::reduce_add(a[h]);
  }
  float inv[NQ];
  for (int h = 0; h < NQ; ++h) inv[h] = 1.0f / softmax_weights<V>(scores + h * n_pos, n_pos);

  F acc[NQ][256 / w];
  for (int h = 0; h < NQ; ++h) {
    for (int64_t i = 0; i < nv; ++i) acc[h][i] = V::zero();
  }
  for (int64_t j = 0; j < n_pos; ++j) {
    const uint16_t* v = values + j * stride;
    F p[NQ];
    for (int h = 0; h < NQ; ++h) p[h] = V::set1(scores[h * n_pos + j]);
    for (int64_t i = 0; i < nv; ++i) {
      const F vv = V::load_f16(v + w * i);
      for (int h = 0; h < NQ; ++h) acc[h][i] = V::fma(p[h], vv, acc[h][i]);
    }
  }
  for (int h = 0; h < NQ; ++h) {
    const F scale_h = V::set1(inv[h]);
    for (int64_t i = 0; i < nv; ++i)
      V::store(out + h * head_dim + w * i, V::mul(acc[h][i], scale_h));
  }
}

// n_q query heads over one KV head, in runs of heads whose accumulators fit the registers
// (NQ x head_dim / kWidth vectors of at most 16); a lone head takes attend_one.
// REQUIRES: head_dim % V::kWidth == 0 and head_dim <= 256 (see attend_kernel).
template <class V>
void attend_with(const float* q, int64_t n_q, const uint16_t* keys, const uint16_t* values,
                 int64_t stride, int64_t n_pos, int64_t head_dim, float scale, float* scores,
                 float* out) {
  const int64_t per_run = std::clamp<int64_t>(16 / (head_dim / V::kWidth), 1, 4);
  for (int64_t h = 0; h < n_q;) {
    const int64_t run = std::min(per_run, n_q - h);
    const float* qh = q + h * head_dim;
    float* outh = out + h * head_dim;
    switch (run) {
      case 4:
        attend_shared<V, 4>(qh, keys, values, stride, n_pos, head_dim, scale, scores, outh);
        break;
      case 3:
        attend_shared<V, 3>(qh, keys, values, stride, n_pos, head_dim, scale, scores, outh);
        break;
      case 2:
        attend_shared<V, 2>(qh, keys, values, stride, n_pos, head_dim, scale, scores, outh);
        break;
      default:
        attend_one<V>(qh, keys, values, stride, n_pos, head_dim, scale, scores, outh);
        break;
    }
    h += run;
  }
}

}  // namespace
}  // namespace herd::kernels
