#include "engine/hyper_connection.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace herd::engine {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace

void hc_weights(const HyperOptions& o, const float* mixes, const float* scale, const float* base,
                float* pre, float* post, float* comb) {
  const int s = o.n_hc;
  HERD_CHECK(s >= 1 && s <= kMaxHyperStreams && o.sinkhorn_iters >= 1);
  for (int i = 0; i < s; ++i) {
    pre[i] = sigmoid(mixes[i] * scale[0] + base[i]) + o.eps;
    post[i] = 2.0f * sigmoid(mixes[s + i] * scale[1] + base[s + i]);
  }
  float* m = comb;  // [s][s], normalised in place
  for (int i = 0; i < s * s; ++i) m[i] = mixes[2 * s + i] * scale[2] + base[2 * s + i];
  auto normalize_rows = [&] {
    for (int r = 0; r < s; ++r) {
      float sum = o.eps;
      for (int c = 0; c < s; ++c) sum += m[r * s + c];
      for (int c = 0; c < s; ++c) m[r * s + c] /= sum;
    }
  };
  auto normalize_columns = [&] {
    for (int c = 0; c < s; ++c) {
      float sum = o.eps;
      for (int r = 0; r < s; ++r) sum += m[r * s + c];
      for (int r = 0; r < s; ++r) m[r * s + c] /= sum;
    }
  };
  for (int r = 0; r < s; ++r) {  // softmax of each row, + eps
    float* row = m + r * s;
    const float mx = *std::max_element(row, row + s);
    float sum = 0;
    for (int c = 0; c < s; ++c) {
      row[c] = std::exp(row[c] - mx);
      sum += row[c];
    }
    for (int c = 0; c < s; ++c) row[c] = row[c] / sum + o.eps;
  }
  normalize_columns();
  for (int i = 1; i < o.sinkhorn_iters; ++i) {
    normalize_rows();
    normalize_columns();
  }
}

void hc_head_weights(const HyperOptions& o, const float* mixes, const float* scale,
                     const float* base, float* pre) {
  for (int i = 0; i < o.n_hc; ++i) pre[i] = sigmoid(mixes[i] * scale[0] + base[i]) + o.eps;
}

void hc_collapse(const float* x, const float* pre, int n_hc, int64_t n_embd, float* out) {
  for (int64_t e = 0; e < n_embd; ++e) out[e] = x[e] * pre[0];
  for (int i = 1; i < n_hc; ++i) {
    const float* xi = x + i * n_embd;
    for (int64_t e = 0; e < n_embd; ++e) out[e] += xi[e] * pre[i];
  }
}

void hc_expand(const float* f, const float* post, const float* comb, int n_hc, int64_t n_embd,
               float* x) {
  HERD_CHECK(n_hc >= 1 && n_hc <= kMaxHyperStreams);
  float r[kMaxHyperStreams];
  for (int64_t e = 0; e < n_embd; ++e) {
    for (int j = 0; j < n_hc; ++j) r[j] = x[j * n_embd + e];
    for (int i = 0; i < n_hc; ++i) {
      float sum = f[e] * post[i];
      for (int j = 0; j < n_hc; ++j) sum += comb[j * n_hc + i] * r[j];
      x[i * n_embd + e] = sum;
    }
  }
}

}  // namespace herd::engine
