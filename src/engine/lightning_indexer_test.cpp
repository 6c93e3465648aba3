#include "engine/lightning_indexer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "quant/float16.h"

namespace herd::engine {
namespace {

TEST(LightningIndexer, ScoresAreWeightedReluDots) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int64_t n_head = 3, dim = 8, n_keys = 6;
  std::vector<float> q(n_head * dim), w(n_head), k(n_keys * dim);
  for (float& x : q) x = d(rng);
  for (float& x : w) x = d(rng);
  std::vector<uint16_t> k16(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = fp32_to_fp16(d(rng));
    k[i] = fp16_to_fp32(k16[i]);
  }
  std::vector<float> scores(n_keys);
  indexer_scores(q.data(), w.data(), n_head, dim, k16.data(), n_keys, scores.data());
  for (int64_t b = 0; b < n_keys; ++b) {
    double want = 0;
    for (int64_t h = 0; h < n_head; ++h) {
      double dot = 0;
      for (int64_t i = 0; i < dim; ++i) dot += double(q[h * dim + i]) * k[b * dim + i];
      want += w[h] * std::max(dot, 0.0);
    }
    EXPECT_NEAR(scores[b], want, 1e-5) << b;
  }
}

TEST(LightningIndexer, TopKIsAStableDescendingSort) {
  std::mt19937 rng(6);
  std::uniform_int_distribution<int> d(0, 9);  // many ties
  for (int64_t n : {1, 3, 4, 5, 40}) {
    std::vector<float> s(n);
    for (float& x : s) x = float(d(rng));
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
    int32_t out[4];
    const int64_t m = top_k(s.data(), n, 4, out);
    ASSERT_EQ(m, std::min<int64_t>(n, 4));
    for (int64_t i = 0; i < m; ++i) EXPECT_EQ(out[i], order[i]) << n << " " << i;
  }
}

}  // namespace
}  // namespace herd::engine
