// Manifold-constrained hyper-connections (mHC, DeepSeek V4): the residual stream of a token is
// n_hc copies ("streams") X_0 .. X_{n_hc-1} of n_embd values instead of one. Before each
// sublayer the streams are mixed into its input, after it the output is spread back:
//
//   mixes m = hc_fn . rms_norm_plain(concat X)            [2 n_hc + n_hc^2]
//   pre_i   = sigmoid(m_i scale[0] + base_i) + eps           how much of X_i the sublayer reads
//   post_i  = 2 sigmoid(m_{n_hc+i} scale[1] + base_{n_hc+i}) how much of f(u) X_i receives
//   C       = Sinkhorn(m_{2 n_hc + n_hc r + c} scale[2] + base)  row r, column c
//   u       = sum_i pre_i X_i                               the sublayer's input
//   X'_i    = post_i f(u) + sum_j C[j][i] X_j              the new streams
//
// Sinkhorn: a softmax over each row, + eps, one column normalisation, then (iters - 1) rounds
// of row and column normalisation; every sum includes eps (as the reference's hc_pre op).
// The output head reduces the streams once more with its own weights: pre_i =
// sigmoid(m_i scale[0] + base_i) + eps, out = sum_i pre_i X_i.
//
// The matrix product hc_fn . x is the caller's (kernels::matmul); these are the cheap parts.
#pragma once

#include <cstdint>

namespace herd::engine {

inline constexpr int kMaxHyperStreams = 8;

struct HyperOptions {
  int n_hc = 4;             // streams per token
  int sinkhorn_iters = 20;  // rounds of normalisation of the combination matrix
  float eps = 1e-6f;        // added to pre and to every Sinkhorn sum
  int64_t n_mixes() const { return 2 * n_hc + n_hc * n_hc; }
};

// One token's sublayer weights from its mixes.
// mixes: [n_mixes]; scale: [3]; base: [n_mixes]; pre, post: [n_hc]; comb: [n_hc][n_hc]
// (comb[r * n_hc + c], row r = source stream).
void hc_weights(const HyperOptions& o, const float* mixes, const float* scale, const float* base,
                float* pre, float* post, float* comb);

// The output head's weights: pre[i] = sigmoid(mixes[i] * scale[0] + base[i]) + eps.
// mixes, base, pre: [n_hc]; scale: [1].
void hc_head_weights(const HyperOptions& o, const float* mixes, const float* scale,
                     const float* base, float* pre);

// out = sum_i pre[i] * x[i]. x: [n_hc][n_embd]; pre: [n_hc]; out: [n_embd].
void hc_collapse(const float* x, const float* pre, int n_hc, int64_t n_embd, float* out);

// x[i] <- post[i] * f + sum_j comb[j][i] * x[j] for every stream i, in place.
// f: [n_embd] the sublayer's output; post: [n_hc]; comb: [n_hc][n_hc]; x: [n_hc][n_embd].
void hc_expand(const float* f, const float* post, const float* comb, int n_hc, int64_t n_embd,
               float* x);

}  // namespace herd::engine
