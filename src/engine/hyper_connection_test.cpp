#include "engine/hyper_connection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace herd::engine {
namespace {

std::vector<float> random_vector(std::mt19937& rng, size_t n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

// The weights written as the matrix algorithm of the mHC paper, in double: a row softmax,
// then alternating column and row normalisation with eps in every sum.
void reference_weights(const HyperOptions& o, const std::vector<float>& m,
                       const std::vector<float>& scale, const std::vector<float>& base,
                       std::vector<double>& pre, std::vector<double>& post,
                       std::vector<std::vector<double>>& c) {
  const int s = o.n_hc;
  pre.assign(s, 0);
  post.assign(s, 0);
  for (int i = 0; i < s; ++i) {
    pre[i] = sigmoid(double(m[i]) * scale[0] + base[i]) + o.eps;
    post[i] = 2 * sigmoid(double(m[s + i]) * scale[1] + base[s + i]);
  }
  c.assign(s, std::vector<double>(s));
  for (int r = 0; r < s; ++r) {
    double sum = 0;
    for (int k = 0; k < s; ++k) {
      c[r][k] = std::exp(double(m[2 * s + r * s + k]) * scale[2] + base[2 * s + r * s + k]);
      sum += c[r][k];
    }
    for (int k = 0; k < s; ++k) c[r][k] = c[r][k] / sum + o.eps;
  }
  for (int it = 0; it < o.sinkhorn_iters; ++it) {
    if (it > 0) {
      for (int r = 0; r < s; ++r) {
        double sum = o.eps;
        for (int k = 0; k < s; ++k) sum += c[r][k];
        for (int k = 0; k < s; ++k) c[r][k] /= sum;
      }
    }
    for (int k = 0; k < s; ++k) {
      double sum = o.eps;
      for (int r = 0; r < s; ++r) sum += c[r][k];
      for (int r = 0; r < s; ++r) c[r][k] /= sum;
    }
  }
}

TEST(HyperConnection, WeightsMatchTheMatrixAlgorithm) {
  std::mt19937 rng(7);
  for (int iters : {1, 3, 20}) {
    HyperOptions o;
    o.sinkhorn_iters = iters;
    const auto m = random_vector(rng, o.n_mixes(), 2.0f);
    const std::vector<float> scale = {0.9f, 1.1f, 1.3f};
    const auto base = random_vector(rng, o.n_mixes(), 0.5f);
    float pre[4], post[4], comb[16];
    hc_weights(o, m.data(), scale.data(), base.data(), pre, post, comb);
    std::vector<double> rpre, rpost;
    std::vector<std::vector<double>> rc;
    reference_weights(o, m, scale, base, rpre, rpost, rc);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(pre[i], rpre[i], 1e-6);
      EXPECT_NEAR(post[i], rpost[i], 1e-6);
      EXPECT_GT(post[i], 0.0f);
      EXPECT_LT(post[i], 2.0f);
      for (int k = 0; k < 4; ++k) EXPECT_NEAR(comb[i * 4 + k], rc[i][k], 2e-6) << iters;
    }
    if (iters == 20) {  // close to doubly stochastic by then (it ends on columns)
      for (int i = 0; i < 4; ++i) {
        double row = 0, col = 0;
        for (int k = 0; k < 4; ++k) {
          row += comb[i * 4 + k];
          col += comb[k * 4 + i];
        }
        EXPECT_NEAR(row, 1.0, 1e-2);  // rows converge more slowly
        EXPECT_NEAR(col, 1.0, 1e-5);
      }
    }
  }
}

TEST(HyperConnection, HeadWeightsAreSigmoidPlusEps) {
  HyperOptions o;
  const std::vector<float> m = {-30, 0, 1, 30}, base = {0, 0, -1, 0}, scale = {2};
  float pre[4];
  hc_head_weights(o, m.data(), scale.data(), base.data(), pre);
  EXPECT_NEAR(pre[0], o.eps, 1e-12);
  EXPECT_NEAR(pre[1], 0.5 + o.eps, 1e-7);
  EXPECT_NEAR(pre[2], sigmoid(1) + o.eps, 1e-7);
  EXPECT_NEAR(pre[3], 1.0, 1e-6);
}

TEST(HyperConnection, CollapseAndExpandFollowTheirSums) {
  std::mt19937 rng(11);
  const int s = 4;
  const int64_t n = 24;
  const auto x = random_vector(rng, s * n, 1.0f), f = random_vector(rng, n, 1.0f);
  const auto pre = random_vector(rng, s, 1.0f), post = random_vector(rng, s, 1.0f);
  const auto comb = random_vector(rng, s * s, 1.0f);
  std::vector<float> u(n);
  hc_collapse(x.data(), pre.data(), s, n, u.data());
  std::vector<float> y = x;
  hc_expand(f.data(), post.data(), comb.data(), s, n, y.data());
  for (int64_t e = 0; e < n; ++e) {
    double want_u = 0;
    for (int i = 0; i < s; ++i) want_u += double(pre[i]) * x[i * n + e];
    EXPECT_NEAR(u[e], want_u, 1e-5);
    for (int i = 0; i < s; ++i) {
      double want = double(post[i]) * f[e];
      for (int j = 0; j < s; ++j) want += double(comb[j * s + i]) * x[j * n + e];
      EXPECT_NEAR(y[i * n + e], want, 1e-5) << i << " " << e;
    }
  }
}

}  // namespace
}  // namespace herd::engine
