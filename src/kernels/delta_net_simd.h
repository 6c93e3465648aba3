// The gated delta rule written once over an ISA's float vectors (`V`): the recurrence and
// the chunked form of delta_net.h. delta_net_avx2.cpp, delta_net_avx512.cpp and
// delta_net_neon.cpp instantiate them with their own compiler flags; delta_net.cpp with
// width-1 "vectors" for the scalar chunked form.
//
// Included only by those files; internal linkage (an unnamed namespace), as panel_gemm.h.
//
// V provides, for kWidth floats per vector F: zero(); set1(f); load(p); store(p, v);
// add, sub, mul; fma(a, b, c) = a * b + c; reduce_add(v).
//
// The state is [dk][dv] (row i: the dv values that key dimension i maps to), so every
// product with it runs along rows of dv: dv must be a multiple of kWidth.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/delta_net.h"

namespace herd::kernels {
namespace {

template <class V>
float dot_with(const float* a, const float* b, int64_t n) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  F acc = V::zero();
  int64_t i = 0;
  for (; i + w <= n; i += w) acc = V::fma(V::load(a + i), V::load(b + i), acc);
  float sum = V::reduce_add(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[0, dv) = a * y + sum_s c[s] x[s * dv ..] for s < n: each block of y stays in registers while
// the rows of x stream past (one load per FMA). dv a multiple of kWidth.
template <class V, int NB>
void combine_block(float* y, float a, const float* c, const float* x, int64_t n, int64_t dv,
                   int64_t col) {
  constexpr int64_t w = V::kWidth;
  typename V::F acc[NB];
  const auto va = V::set1(a);
  for (int b = 0; b < NB; ++b) acc[b] = V::mul(va, V::load(y + col + b * w));
  for (int64_t s = 0; s < n; ++s) {
    const auto cs = V::set1(c[s]);
    const float* xs = x + s * dv + col;
    for (int b = 0; b < NB; ++b) acc[b] = V::fma(cs, V::load(xs + b * w), acc[b]);
  }
  for (int b = 0; b < NB; ++b) V::store(y + col + b * w, acc[b]);
}

template <class V>
void combine_with(float* y, float a, const float* c, const float* x, int64_t n, int64_t dv) {
  constexpr int64_t w = V::kWidth;
  constexpr int kBlock = 8;
  int64_t col = 0;
  for (; col + kBlock * w <= dv; col += kBlock * w)
    combine_block<V, kBlock>(y, a, c, x, n, dv, col);
  for (; col < dv; col += w) combine_block<V, 1>(y, a, c, x, n, dv, col);
}

// NB vectors of dv starting at column `col`: wk = sum_i k[i] S[i][col..], wq likewise with q,
// in one pass down the state's rows (each row block loaded once for both).
template <class V, int NB>
void state_times_block(const float* state, int64_t dk, int64_t dv, int64_t col, const float* k,
                       const float* q, typename V::F* wk, typename V::F* wq) {
  constexpr int64_t w = V::kWidth;
  for (int b = 0; b < NB; ++b) wk[b] = wq[b] = V::zero();
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = state + i * dv + col;
    const auto ki = V::set1(k[i]), qi = V::set1(q[i]);
    for (int b = 0; b < NB; ++b) {
      const auto s = V::load(row + b * w);
      wk[b] = V::fma(ki, s, wk[b]);
      wq[b] = V::fma(qi, s, wq[b]);
    }
  }
}

// wk = S^T k and wq = S^T q ([dv] each) for the state S [dk][dv].
template <class V>
void state_times(const float* state, int64_t dk, int64_t dv, const float* k, const float* q,
                 float* wk, float* wq) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  constexpr int kBlock = 4;  // 8 accumulators + 4 rows + 2 broadcasts fit 16 registers
  int64_t col = 0;
  F ak[kBlock], aq[kBlock];
  for (; col + kBlock * w <= dv; col += kBlock * w) {
    state_times_block<V, kBlock>(state, dk, dv, col, k, q, ak, aq);
    for (int b = 0; b < kBlock; ++b) {
      V::store(wk + col + b * w, ak[b]);
      V::store(wq + col + b * w, aq[b]);
    }
  }
  for (; col < dv; col += w) {
    state_times_block<V, 1>(state, dk, dv, col, k, q, ak, aq);
    V::store(wk + col, ak[0]);
    V::store(wq + col, aq[0]);
  }
}

// state_times for NT tokens at once (rows wk + t * dv, wq + t * dv): two vectors of a
// state row per step, loaded once for all of them.
template <class V, int NT>
void state_times_tokens(const float* state, int64_t dk, int64_t dv, const float* const* k,
                        const float* const* q, float* wk, float* wq) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  constexpr int NB = 2;
  int64_t col = 0;
  for (; col + NB * w <= dv; col += NB * w) {
    F ak[NT][NB], aq[NT][NB];
    for (int t = 0; t < NT; ++t) {
      for (int b = 0; b < NB; ++b) ak[t][b] = aq[t][b] = V::zero();
    }
    for (int64_t i = 0; i < dk; ++i) {
      const float* row = state + i * dv + col;
      F s[NB];
      for (int b = 0; b < NB; ++b) s[b] = V::load(row + b * w);
      for (int t = 0; t < NT; ++t) {
        const F ki = V::set1(k[t][i]), qi = V::set1(q[t][i]);
        for (int b = 0; b < NB; ++b) {
          ak[t][b] = V::fma(ki, s[b], ak[t][b]);
          aq[t][b] = V::fma(qi, s[b], aq[t][b]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      for (int b = 0; b < NB; ++b) {
        V::store(wk + t * dv + col + b * w, ak[t][b]);
        V::store(wq + t * dv + col + b * w, aq[t][b]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    // The last odd vector (dv / kWidth odd): one token at a time.
    for (int64_t c = col; c < dv; c += w) {
      F ak[1], aq[1];
      state_times_block<V, 1>(state, dk, dv, c, k[t], q[t], ak, aq);
      V::store(wk + t * dv + c, ak[0]);
      V::store(wq + t * dv + c, aq[0]);
    }
  }
}

// Token by token: one pass over the state for S^T k and S^T q (the old state: the decay and
// the new token's term are applied to them algebraically), one pass to update it.
template <class V>
void recurrent_with(const DeltaRuleArgs& a) {
  using F = typename V::F;
  constexpr int64_t w = V::kWidth;
  const int64_t dk = a.dk, dv = a.dv;
  float* wk = a.scratch;       // [dv]: S^T k, then the new value u
  float* wq = a.scratch + dv;  // [dv]: S^T q
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.q_stride;
    const float* k = a.k + t * a.k_stride;
    const float* v = a.v + t * a.v_stride;
    const float beta = a.beta[t * a.gate_stride];
    const float decay = std::exp(a.g[t * a.gate_stride]);
    float* out = a.out + t * a.out_stride;
    const float kq = dot_with<V>(k, q, dk) * a.scale;
    state_times<V>(a.state, dk, dv, k, q, wk, wq);
    // u = beta (v - decay S k); o = (decay S + u k^T) (scale q) = decay scale S q + (k . q) u
    const F vbeta = V::set1(beta), vdecay = V::set1(decay), vkq = V::set1(kq);
    const F vout = V::set1(decay * a.scale);
    for (int64_t j = 0; j < dv; j += w) {
      const F u = V::mul(vbeta, V::sub(V::load(v + j), V::mul(vdecay, V::load(wk + j))));
      V::store(wk + j, u);
      V::store(out + j, V::fma(vkq, u, V::mul(vout, V::load(wq + j))));
    }
    for (int64_t i = 0; i < dk; ++i) {
      float* row = a.state + i * dv;
      const F ki = V::set1(k[i]);
      for (int64_t j = 0; j < dv; j += w) {
        V::store(row + j, V::fma(ki, V::load(wk + j), V::mul(vdecay, V::load(row + j))));
      }
    }
  }
}

// One chunk of L tokens starting at token t0. With G_t the cumulative log decay inside the
// chunk and S0 the state at its start, the recurrence unrolls to
//   u_t = beta_t (v_t - e^G_t S0 k_t) - beta_t sum_{s<t} e^(G_t - G_s) (k_t . k_s) u_s
//   o_t = e^G_t S0 (scale q_t) + sum_{s<=t} e^(G_t - G_s) (scale q_t . k_s) u_s
//   S   = e^G_L S0 + sum_s e^(G_L - G_s) u_s k_s^T
// so the state is read for all L tokens in one pass (S0 k_t, S0 q_t), the u_t come from a
// triangular system of L rows, and the state is written once. Every exponent is <= 0.
template <class V>
void chunk_with(const DeltaRuleArgs& a, int64_t t0, int64_t L) {
  const int64_t dk = a.dk, dv = a.dv, C = kDeltaChunk;
  float* G = a.scratch;    // [C]
  float* W = G + C;        // [C][dv]: S0 k_t
  float* Y = W + C * dv;   // [C][dv]: S0 q_t
  float* U = Y + C * dv;   // [C][dv]: u_t
  float* KK = U + C * dv;  // [C][C]: k_t . k_s, s < t
  float* QK = KK + C * C;  // [C][C]: q_t . k_s, s <= t
  auto q = [&](int64_t t) { return a.q + (t0 + t) * a.q_stride; };
  auto k = [&](int64_t t) { return a.k + (t0 + t) * a.k_stride; };
  float sum = 0;
  for (int64_t t = 0; t < L; ++t) G[t] = sum += a.g[(t0 + t) * a.gate_stride];

  // S0 k_t and S0 q_t two tokens at a time: each block of a state row loaded once for both.
  int64_t t = 0;
  for (; t + 2 <= L; t += 2) {
    const float* ks[2] = {k(t), k(t + 1)};
    const float* qs[2] = {q(t), q(t + 1)};
    state_times_tokens<V, 2>(a.state, dk, dv, ks, qs, W + t * dv, Y + t * dv);
  }
  if (t < L) state_times<V>(a.state, dk, dv, k(t), q(t), W + t * dv, Y + t * dv);
  for (t = 0; t < L; ++t) {
    for (int64_t s = 0; s < t; ++s) KK[t * C + s] = dot_with<V>(k(t), k(s), dk);
    for (int64_t s = 0; s <= t; ++s) QK[t * C + s] = dot_with<V>(q(t), k(s), dk) * a.scale;
  }
  // Forward substitution, row by row.
  for (int64_t t = 0; t < L; ++t) {
    const float beta = a.beta[(t0 + t) * a.gate_stride];
    const float* v = a.v + (t0 + t) * a.v_stride;
    float* u = U + t * dv;
    const float* wt = W + t * dv;
    const float e = std::exp(G[t]);
    for (int64_t j = 0; j < dv; ++j) u[j] = beta * (v[j] - e * wt[j]);
    // KK's row t becomes its coefficients in place (only row t reads it).
    float* kt = KK + t * C;
    for (int64_t s = 0; s < t; ++s) kt[s] *= -beta * std::exp(G[t] - G[s]);
    combine_with<V>(u, 1.0f, kt, U, t, dv);
  }
  for (int64_t t = 0; t < L; ++t) {
    float* o = a.out + (t0 + t) * a.out_stride;
    std::copy(Y + t * dv, Y + (t + 1) * dv, o);
    float* qt = QK + t * C;
    for (int64_t s = 0; s <= t; ++s) qt[s] *= std::exp(G[t] - G[s]);
    combine_with<V>(o, std::exp(G[t]) * a.scale, qt, U, t + 1, dv);
  }
  // The state: each row scaled once and given the chunk's L rank-one terms, weights
  // e^(G_L - G_s) k_s[i] (the decays in G, no longer needed as sums; the weights in KK's
  // first row).
  const float last = G[L - 1];
  for (int64_t s = 0; s < L; ++s) G[s] = std::exp(last - G[s]);
  const float e_last = std::exp(last);
  for (int64_t i = 0; i < dk; ++i) {
    for (int64_t s = 0; s < L; ++s) KK[s] = G[s] * k(s)[i];
    combine_with<V>(a.state + i * dv, e_last, KK, U, L, dv);
  }
}

template <class V>
void chunked_with(const DeltaRuleArgs& a) {
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kDeltaChunk) {
    chunk_with<V>(a, t0, std::min(kDeltaChunk, a.n_tokens - t0));
  }
}

}  // namespace
}  // namespace herd::kernels
