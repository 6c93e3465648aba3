#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace herd::engine {
namespace {

TEST(Sampler, GreedyAtZeroTemperature) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> logits = {0.1f, 3.0f, 3.0f, -1.0f};
  EXPECT_EQ(s.sample(logits), 1);  // ties go to the lower id
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  std::vector<float> logits = {1, 2, 3, 4, 5, 0, -1};
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits));
}

TEST(Sampler, TopKAndMinPRestrictChoices) {
  SamplerParams p;
  p.temperature = 5.0f;  // flat, so restrictions matter
  p.top_k = 2;
  p.top_p = 1.0f;
  p.min_p = 0;
  Sampler s(p);
  std::vector<float> logits = {0, 10, 9.5f, 1, 2};
  for (int i = 0; i < 200; ++i) {
    int32_t t = s.sample(logits);
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
  p.top_k = 0;
  p.min_p = 0.5f;  // keeps tokens with prob >= half the top one's
  Sampler m(p);
  std::vector<float> peaked = {0, 10, 0, 0};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(m.sample(peaked), 1);
}

TEST(Sampler, TemperatureFollowsTheDistribution) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  Sampler s(p);
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += s.sample(logits);
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(Sampler, PenaltiesDiscourageRepeats) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> logits = {3.0f, 2.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);  // 3 / 2 < 2
  SamplerParams q;
  q.temperature = 0;
  q.presence_penalty = 0.5f;
  q.frequency_penalty = 0.3f;
  Sampler f(q);
  f.accept(0);
  f.accept(0);
  EXPECT_EQ(f.sample(logits), 1);  // 3 - 0.5 - 0.6 < 2
}

TEST(Sampler, CheckGivesTheDrawsProbabilityAndGapAfterPenalties) {
  SamplerParams p;
  p.temperature = 0.5f;  // the probability ignores top-k/top-p/min-p: only the temperature
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  const double z = std::exp(4.0) + std::exp(2.0) + std::exp(0.0);  // logits / 0.5
  DrawCheck c = s.check(logits, 1);
  EXPECT_NEAR(c.probability, std::exp(2.0) / z, 1e-6);
  EXPECT_FLOAT_EQ(c.gap, 1.0f);
  double entropy = 0, square = 0;
  for (double l : {4.0, 2.0, 0.0}) {
    const double p = std::exp(l) / z, log_p = l - std::log(z);
    entropy -= p * log_p;
    square += p * log_p * log_p;
  }
  EXPECT_NEAR(c.entropy, entropy, 1e-6);
  EXPECT_NEAR(c.variance, square - entropy * entropy, 1e-6);
  s.accept(0);  // 2 / 2 = 1: tokens 0 and 1 tie
  c = s.check(logits, 1);
  EXPECT_NEAR(c.probability, std::exp(2.0) / (2 * std::exp(2.0) + 1), 1e-6);
  EXPECT_FLOAT_EQ(c.gap, 0.0f);
  EXPECT_EQ(s.check(logits, 3).probability, 0.0);  // outside the vocabulary

  p.temperature = 0;
  Sampler greedy_sampler(p);
  EXPECT_EQ(greedy_sampler.check(logits, 0).probability, 1.0);
  c = greedy_sampler.check(logits, 2);
  EXPECT_EQ(c.probability, 0.0);
  EXPECT_FLOAT_EQ(c.gap, 2.0f);
}

// Allows the tokens in a set; counts how often the whole set was asked for.
struct SetFilter : TokenFilter {
  std::vector<int32_t> ids;
  int n_masks = 0;
  bool allows(int32_t token) override {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  }
  void allowed_tokens(std::span<uint8_t> allowed) override {
    ++n_masks;
    for (int32_t t : ids) allowed[static_cast<size_t>(t)] = 1;
  }
};

TEST(Sampler, FilterRestrictsGreedyAndSampledDraws) {
  std::vector<float> logits = {0, 10, 9.5f, 1, 2};
  SetFilter filter;
  filter.ids = {3, 4};
  SamplerParams greedy_params;
  greedy_params.temperature = 0;
  Sampler greedy_sampler(greedy_params);
  EXPECT_EQ(greedy_sampler.sample(logits, &filter), 4);
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.repeat_penalty = 0.0f;  // 0 * -inf must not turn a masked token into NaN
  Sampler s(p);
  s.accept(0);
  s.accept(1);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 400; ++i) ++seen[s.sample(logits, &filter)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[4], seen[3]);  // e^2 against e^1 among the allowed
}

TEST(Sampler, FilterIsAskedForTheWholeSetOnlyWhenTheDrawIsRefused) {
  std::vector<float> logits = {0, 10, 0, 0};
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  SetFilter filter;
  filter.ids = {1, 2};
  EXPECT_EQ(s.sample(logits, &filter), 1);
  EXPECT_EQ(filter.n_masks, 0);
  filter.ids = {2};
  EXPECT_EQ(s.sample(logits, &filter), 2);
  EXPECT_EQ(filter.n_masks, 1);
  filter.ids = {};
  EXPECT_EQ(s.sample(logits, &filter), -1);  // nothing allowed
}

}  // namespace
}  // namespace herd::engine
