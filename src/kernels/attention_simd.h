// The SIMD attention kernel (and the FFN's SiLU product), written once over an ISA's float vector
// primitives (`V`, see attention_avx512.cpp for the list); attention_avx2.cpp and
// attention_avx512.cpp instantiate it with their own compiler flags. F16 keys and values are
// widened on load, four positions per step for independent FMA chains, and the softmax uses a
// vector exp.
//
// Included only by the ISA files; everything here has internal linkage (an unnamed
// namespace), as in panel_gemm.h, so each ISA file gets its own copy.
//
// V provides, for kWidth floats per vector F (and kWideHeads, heads per attend_wide run):
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

// Softmax weights of scores[0, n_pos) in place (unnormalized: e^(s - max)); returns their sum,
// which counts e^(sink - max) too (-INFINITY: no sink).
template <class V>
float softmax_weights(float* scores, int64_t n_pos, float sink) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  int64_t j = 0;
  F vmax = V::set1(-INFINITY);
  for (; j + w <= n_pos; j += w) vmax = V::max(vmax, V::load(scores + j));
  float max = std::max(V::reduce_max(vmax), sink);
  for (; j < n_pos; ++j) max = std::max(max, scores[j]);
  const F m = V::set1(max);
  F vsum = V::zero();
  for (j = 0; j + w <= n_pos; j += w) {
    const F e = exp_nonpositive<V>(V::sub(V::load(scores + j), m));
    V::store(scores + j, e);
    vsum = V::add(vsum, e);
  }
  float sum = V::reduce_add(vsum);
  if (sink != -INFINITY) sum += std::exp(sink - max);
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

// scores[0, n) replaced by e^(s - max) for a max at least each of them; returns their sum.
template <class V>
float softmax_weights_at(float* scores, int64_t n, float max) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  const F m = V::set1(max);
  F vsum = V::zero();
  int64_t j = 0;
  for (; j + w <= n; j += w) {
    const F e = exp_nonpositive<V>(V::sub(V::load(scores + j), m));
    V::store(scores + j, e);
    vsum = V::add(vsum, e);
  }
  float sum = V::reduce_add(vsum);
  for (; j < n; ++j) sum += scores[j] = std::exp(scores[j] - max);
  return sum;
}

// One query head: scores four keys at a time (four independent FMA chains).
template <class V>
void attend_one(const float* q, const uint16_t* keys, const uint16_t* values, int64_t stride,
                int64_t n_pos, int64_t head_dim, float scale, float sink, float* scores,
                float* out) {
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
  const F inv = V::set1(1.0f / softmax_weights<V>(scores, n_pos, sink));

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
                   int64_t n_pos, int64_t head_dim, float scale, const float* sinks, float* scores,
                   float* out) {
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
  for (int h = 0; h < NQ; ++h) {
    const float sink = sinks != nullptr ? sinks[h] : -INFINITY;
    inv[h] = 1.0f / softmax_weights<V>(scores + h * n_pos, n_pos, sink);
  }

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

// Heads with long keys and values (multi-head latent attention: 576 and 512): q and the
// output live in memory (L1), not registers. One pass over the cache (the cache of a long
// context is far larger than L2, so every extra pass is a read from memory): blocks of kBlock
// positions, each scored for the NH heads (every widened key row shared by them, two rows
// at a time) and at once summed into the outputs while the block is in L1, with the softmax
// taken online (the outputs rescaled when a block raises a head's maximum).
template <class V, int NH>
void attend_wide_heads(const AttendArgs& a, int64_t h0) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  constexpr int64_t kBlock = 32;
  const int64_t nk = a.k_dim / w, nv = a.v_dim / w, n_pos = a.n_pos;
  const float* q[NH];
  float* scores[NH];  // [NH][block] of a.scores: the block's scores, then its weights
  float* out[NH];
  float max[NH], sum[NH];
  for (int h = 0; h < NH; ++h) {
    q[h] = a.q + (h0 + h) * a.k_dim;
    scores[h] = a.scores + (h0 + h) * std::min(kBlock, n_pos);
    out[h] = a.out + (h0 + h) * a.v_dim;
    max[h] = -INFINITY;
    sum[h] = 0.0f;
    for (int64_t i = 0; i < nv; ++i) V::store(out[h] + w * i, V::zero());
  }
  for (int64_t jb = 0; jb < n_pos; jb += kBlock) {
    const int64_t n = std::min(kBlock, n_pos - jb);
    const uint16_t* block = a.keys + jb * a.stride;
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      const uint16_t* k0 = block + j * a.stride;
      const uint16_t* k1 = k0 + a.stride;
      F acc0[NH], acc1[NH];
      for (int h = 0; h < NH; ++h) acc0[h] = acc1[h] = V::zero();
      for (int64_t i = 0; i < nk; ++i) {
        const F x0 = V::load_f16(k0 + w * i), x1 = V::load_f16(k1 + w * i);
        for (int h = 0; h < NH; ++h) {
          const F qv = V::load(q[h] + w * i);
          acc0[h] = V::fma(qv, x0, acc0[h]);
          acc1[h] = V::fma(qv, x1, acc1[h]);
        }
      }
      for (int h = 0; h < NH; ++h) {
        scores[h][j] = V::reduce_add(acc0[h]) * a.scale;
        scores[h][j + 1] = V::reduce_add(acc1[h]) * a.scale;
      }
    }
    if (j < n) {
      const uint16_t* k0 = block + j * a.stride;
      F acc[NH];
      for (int h = 0; h < NH; ++h) acc[h] = V::zero();
      for (int64_t i = 0; i < nk; ++i) {
        const F x0 = V::load_f16(k0 + w * i);
        for (int h = 0; h < NH; ++h) acc[h] = V::fma(V::load(q[h] + w * i), x0, acc[h]);
      }
      for (int h = 0; h < NH; ++h) scores[h][j] = V::reduce_add(acc[h]) * a.scale;
    }
    // Online softmax: weights e^(s - max) under the running maximum; what was summed under
    // an older maximum is rescaled by e^(old - new).
    for (int h = 0; h < NH; ++h) {
      float block_max = max[h];
      for (int64_t jj = 0; jj < n; ++jj) block_max = std::max(block_max, scores[h][jj]);
      if (block_max > max[h]) {
        const float c = std::exp(max[h] - block_max);  // 0 on the first block
        sum[h] *= c;
        if (jb > 0) {
          const F cv = V::set1(c);
          for (int64_t i = 0; i < nv; ++i)
            V::store(out[h] + w * i, V::mul(V::load(out[h] + w * i), cv));
        }
        max[h] = block_max;
      }
      sum[h] += softmax_weights_at<V>(scores[h], n, max[h]);
    }
    const uint16_t* values = a.values + jb * a.stride;
    int64_t i = 0;
    for (; i + 2 <= nv; i += 2) {
      F acc0[NH], acc1[NH];
      for (int h = 0; h < NH; ++h) {
        acc0[h] = V::load(out[h] + w * i);
        acc1[h] = V::load(out[h] + w * (i + 1));
      }
      for (int64_t jj = 0; jj < n; ++jj) {
        const uint16_t* row = values + jj * a.stride + w * i;
        const F x0 = V::load_f16(row), x1 = V::load_f16(row + w);
        for (int h = 0; h < NH; ++h) {
          const F p = V::set1(scores[h][jj]);
          acc0[h] = V::fma(p, x0, acc0[h]);
          acc1[h] = V::fma(p, x1, acc1[h]);
        }
      }
      for (int h = 0; h < NH; ++h) {
        V::store(out[h] + w * i, acc0[h]);
        V::store(out[h] + w * (i + 1), acc1[h]);
      }
    }
    for (; i < nv; ++i) {
      F acc[NH];
      for (int h = 0; h < NH; ++h) acc[h] = V::load(out[h] + w * i);
      for (int64_t jj = 0; jj < n; ++jj) {
        const F x0 = V::load_f16(values + jj * a.stride + w * i);
        for (int h = 0; h < NH; ++h) acc[h] = V::fma(V::set1(scores[h][jj]), x0, acc[h]);
      }
      for (int h = 0; h < NH; ++h) V::store(out[h] + w * i, acc[h]);
    }
  }
  for (int h = 0; h < NH; ++h) {
    if (a.partial != nullptr) {
      a.partial[2 * (h0 + h)] = max[h];
      a.partial[2 * (h0 + h) + 1] = sum[h];
      continue;
    }
    if (a.sinks != nullptr) sum[h] += std::exp(a.sinks[h0 + h] - max[h]);
    const F inv = V::set1(1.0f / sum[h]);
    for (int64_t i = 0; i < nv; ++i) V::store(out[h] + w * i, V::mul(V::load(out[h] + w * i), inv));
  }
}

// REQUIRES: k_dim and v_dim multiples of V::kWidth (see attend_kernel). Runs of up to
// V::kWideHeads heads (as many as keep two rows' accumulators of each in registers).
template <class V>
void attend_wide_with(const AttendArgs& a) {
  constexpr int64_t kRun = V::kWideHeads;
  int64_t h = 0;
  for (; h + kRun <= a.n_q; h += kRun) attend_wide_heads<V, kRun>(a, h);
  switch (a.n_q - h) {
    case 7:
      if constexpr (kRun > 7) attend_wide_heads<V, 7>(a, h);
      break;
    case 6:
      if constexpr (kRun > 6) attend_wide_heads<V, 6>(a, h);
      break;
    case 5:
      if constexpr (kRun > 5) attend_wide_heads<V, 5>(a, h);
      break;
    case 4:
      if constexpr (kRun > 4) attend_wide_heads<V, 4>(a, h);
      break;
    case 3:
      attend_wide_heads<V, 3>(a, h);
      break;
    case 2:
      attend_wide_heads<V, 2>(a, h);
      break;
    case 1:
      attend_wide_heads<V, 1>(a, h);
      break;
    default:
      break;
  }
}

// Wide heads with the heads across the lanes (x86, where an FMA broadcasts one float from
// memory for free): no horizontal sums. Per block of kRows positions and group of kWidth
// heads, scores[r] (a vector: one lane per head) = sum_d q^T[d] * row_r[d], the online
// softmax lane by lane, and out^T[dv] += sum_r p[r] * row_r[dv]. The block's rows are widened
// to f32 kLaneDims values at a time, just before use, into a buffer that stays in L1: widened
// whole (16 rows x 576 values), the buffer was evicted by q^T and out^T between blocks and its
// stores cost a third of the kernel.
// Scratch (a.scores): groups * kWidth * (k_dim + v_dim + kLaneRows + 2) + kLaneRows *
// kLaneDims floats (attend_scratch_floats counts the widest ISA's). The values must be the
// keys (v_dim <= k_dim), else it is attend_wide. REQUIRES: k_dim and v_dim multiples of
// kWidth (attend_kernel's choice), so whole vectors are widened and out^T is whole chunks.
template <class V>
void attend_lanes_with(const AttendArgs& a) {
  if (a.values != a.keys || a.v_dim > a.k_dim) {  // the widened rows are the values
    attend_wide_with<V>(a);
    return;
  }
  using F = typename V::F;
  constexpr int64_t w = V::kWidth, kRows = V::kLaneRows, kChunk = V::kLaneRows;
  static_assert(kChunk == w && kLaneDims % w == 0);
  const int64_t k_dim = a.k_dim, v_dim = a.v_dim, n_pos = a.n_pos;
  const int64_t groups = (a.n_q + w - 1) / w;
  float* const q_t = a.scores;                        // [groups][k_dim][w], scaled
  float* const out_t = q_t + groups * k_dim * w;      // [groups][v_dim][w]
  float* const weights = out_t + groups * v_dim * w;  // [groups][kRows][w]
  float* const max = weights + groups * kRows * w;    // [groups][w]
  float* const sum = max + groups * w;                // [groups][w]
  float* const rows = sum + groups * w;               // [kRows][kLaneDims]: rows widened
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t d = 0; d < k_dim; ++d) {
      for (int64_t l = 0; l < w; ++l) {
        const int64_t h = g * w + l;
        q_t[(g * k_dim + d) * w + l] = h < a.n_q ? a.q[h * k_dim + d] * a.scale : 0.0f;
      }
    }
    for (int64_t i = 0; i < v_dim; ++i) V::store(out_t + (g * v_dim + i) * w, V::zero());
    V::store(max + g * w, V::set1(-INFINITY));
    V::store(sum + g * w, V::zero());
  }
  // rows[r][i] = row (jb + r)'s values [d0, d0 + nd) in f32, zeros past the block's n rows.
  // With `ahead`, the same values of the next block's rows are fetched into the cache (to
  // L2): without it the loads waited on memory for a third of the kernel's time (16 rows
  // apart are more streams than the hardware prefetcher follows).
  auto widen = [&](int64_t jb, int64_t n, int64_t d0, int64_t nd, bool ahead) {
    for (int64_t r = 0; r < kRows; ++r) {
      const uint16_t* src = a.keys + (jb + r) * a.stride + d0;
      for (int64_t i = 0; i < nd; i += w)
        V::store(rows + r * kLaneDims + i, r < n ? V::load_f16(src + i) : V::zero());
      if (ahead && jb + kRows + r < n_pos) {
        const char* next = reinterpret_cast<const char*>(src + kRows * a.stride);
        for (int64_t b = 0; b < nd * 2; b += 64) __builtin_prefetch(next + b, 0, 2);
      }
    }
  };
  for (int64_t jb = 0; jb < n_pos; jb += kRows) {
    const int64_t n = std::min(kRows, n_pos - jb);
    for (int64_t g = 0; g < groups; ++g) {
      F acc[kRows];
      for (int64_t r = 0; r < kRows; ++r) acc[r] = V::zero();
      for (int64_t d0 = 0; d0 < k_dim; d0 += kLaneDims) {
        const int64_t nd = std::min(kLaneDims, k_dim - d0);
        widen(jb, n, d0, nd, g == 0);
        const float* qg = q_t + (g * k_dim + d0) * w;
        for (int64_t d = 0; d < nd; ++d) {
          const F qv = V::load(qg + d * w);
          for (int64_t r = 0; r < kRows; ++r)
            acc[r] = V::fma(qv, V::set1(rows[r * kLaneDims + d]), acc[r]);
        }
      }
      // Online softmax, one lane per head.
      const F old_max = V::load(max + g * w);
      F new_max = old_max;
      for (int64_t r = 0; r < n; ++r) new_max = V::max(new_max, acc[r]);
      const F c = exp_nonpositive<V>(V::sub(old_max, new_max));  // ~0 on the first block
      F total = V::mul(V::load(sum + g * w), c);
      float* pg = weights + g * kRows * w;
      for (int64_t r = 0; r < n; ++r) {
        const F p = exp_nonpositive<V>(V::sub(acc[r], new_max));
        total = V::add(total, p);
        V::store(pg + r * w, p);
      }
      V::store(max + g * w, new_max);
      V::store(sum + g * w, total);
      float* og = out_t + g * v_dim * w;
      for (int64_t d0 = 0; d0 < v_dim; d0 += kLaneDims) {
        const int64_t nd = std::min(kLaneDims, v_dim - d0);
        widen(jb, n, d0, nd, false);
        for (int64_t i = 0; i < nd; i += kChunk) {
          F o[kChunk];
          float* oi = og + (d0 + i) * w;
          for (int64_t k = 0; k < kChunk; ++k) o[k] = V::mul(V::load(oi + k * w), c);
          for (int64_t r = 0; r < n; ++r) {
            const F p = V::load(pg + r * w);
            const float* row = rows + r * kLaneDims + i;
            for (int64_t k = 0; k < kChunk; ++k) o[k] = V::fma(p, V::set1(row[k]), o[k]);
          }
          for (int64_t k = 0; k < kChunk; ++k) V::store(oi + k * w, o[k]);
        }
      }
    }
  }
  for (int64_t h = 0; h < a.n_q; ++h) {
    const int64_t g = h / w, l = h % w;
    float total = sum[g * w + l];
    if (a.partial != nullptr) {
      a.partial[2 * h] = max[g * w + l];
      a.partial[2 * h + 1] = total;
    } else if (a.sinks != nullptr) {
      total += std::exp(a.sinks[h] - max[g * w + l]);
    }
    const float inv = a.partial != nullptr ? 1.0f : 1.0f / total;
    const float* og = out_t + g * v_dim * w + l;
    for (int64_t i = 0; i < v_dim; ++i) a.out[h * v_dim + i] = og[i * w] * inv;
  }
}

// n_q query heads over one KV head, in runs of heads whose accumulators fit the registers
// (NQ x head_dim / kWidth vectors of at most 16); a lone head takes attend_one.
// REQUIRES: k_dim == v_dim, a multiple of V::kWidth, at most 256 (see attend_kernel).
template <class V>
void attend_with(const AttendArgs& a) {
  const int64_t head_dim = a.k_dim;
  const int64_t per_run = std::clamp<int64_t>(16 / (head_dim / V::kWidth), 1, 4);
  for (int64_t h = 0; h < a.n_q;) {
    const int64_t run = std::min(per_run, a.n_q - h);
    const float* qh = a.q + h * head_dim;
    float* outh = a.out + h * head_dim;
    const float* sinks = a.sinks != nullptr ? a.sinks + h : nullptr;
    switch (run) {
      case 4:
        attend_shared<V, 4>(qh, a.keys, a.values, a.stride, a.n_pos, head_dim, a.scale, sinks,
                            a.scores, outh);
        break;
      case 3:
        attend_shared<V, 3>(qh, a.keys, a.values, a.stride, a.n_pos, head_dim, a.scale, sinks,
                            a.scores, outh);
        break;
      case 2:
        attend_shared<V, 2>(qh, a.keys, a.values, a.stride, a.n_pos, head_dim, a.scale, sinks,
                            a.scores, outh);
        break;
      default:
        attend_one<V>(qh, a.keys, a.values, a.stride, a.n_pos, head_dim, a.scale,
                      sinks != nullptr ? *sinks : -INFINITY, a.scores, outh);
        break;
    }
    h += run;
  }
}

}  // namespace
}  // namespace herd::kernels
