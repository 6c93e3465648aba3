#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace herd::engine {
namespace {

TEST(LookupDraft, ProposesWhatFollowedTheLatestEarlierOccurrenceOfTheLongestTail) {
  //                    0  1  2  3  4  5  6  7  8  9
  const std::vector<int32_t> t = {5, 6, 7, 8, 9, 1, 6, 7, 2, 6, 7};
  // Tail (6 7): latest earlier occurrence at 6..7, followed by 2, 6, 7.
  EXPECT_EQ(lookup_draft(t, 1, 3, 3), (std::vector<int32_t>{2, 6, 7}));
  EXPECT_EQ(lookup_draft(t, 1, 3, 1), (std::vector<int32_t>{2}));
  // A longer tail wins: (1 6 7) occurred once, followed by 2.
  const std::vector<int32_t> u = {1, 6, 7, 2, 3, 6, 7, 4, 1, 6, 7};
  EXPECT_EQ(lookup_draft(u, 1, 3, 2), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(lookup_draft(u, 1, 2, 2), (std::vector<int32_t>{4, 1}));  // (6 7) latest at 5
  // Nothing to find, or nothing asked.
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{1, 2, 3}, 1, 3, 4).empty());
  EXPECT_TRUE(lookup_draft(t, 1, 3, 0).empty());
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{}, 1, 3, 4).empty());
  // A match that runs into the end goes on with the period it shows (repetitive text).
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{4, 4}, 1, 2, 5),
            (std::vector<int32_t>{4, 4, 4, 4, 4}));
  EXPECT_EQ(lookup_draft(t, 1, 3, 5), (std::vector<int32_t>{2, 6, 7, 2, 6}));
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{8, 1, 2, 1, 2}, 2, 2, 3),
            (std::vector<int32_t>{1, 2, 1}));
}

std::vector<float> rows_of(const std::vector<std::vector<float>>& rows) {
  std::vector<float> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

TEST(CheckDraft, GreedyKeepsExactlyTheTargetsChoices) {
  SamplerParams greedy;
  greedy.temperature = 0;
  const std::vector<float> rows = rows_of({{0, 3, 1, 0}, {2, 0, 1, 0}, {0, 0, 0, 5}});
  Sampler a(greedy);
  // Draft 1, 0: both the target's choices; the bonus token is row 2's: 3.
  DraftVerdict v = check_draft(a, std::vector<int32_t>{1, 0}, rows, 4);
  EXPECT_EQ(v.accepted, 2);
  EXPECT_EQ(v.next, 3);
  // Draft 1, 2: the second is refused; next is the target's choice there: 0.
  Sampler b(greedy);
  v = check_draft(b, std::vector<int32_t>{1, 2}, rows, 4);
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.next, 0);
  // A wrong first token: nothing kept.
  Sampler c(greedy);
  v = check_draft(c, std::vector<int32_t>{2, 0}, rows, 4);
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.next, 1);
}

// The first token out of check_draft (a kept draft token, or `next`) over many trials,
// against the target's softmax: a chi-square test over the 5 tokens (4 degrees of freedom;
// 30 is far beyond the 0.999 quantile, 18.5, so an honest rule fails it about never and a
// wrong one, e.g. keeping every draft token, fails it by thousands).
double chi_square_of_first_tokens(bool with_draft_probs) {
  const std::vector<float> target = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f};
  const std::vector<float> draft_dist = {0.05f, 0.6f, 0.2f, 0.1f, 0.05f};  // unlike the target
  std::vector<double> p(5);
  double z = 0;
  for (size_t i = 0; i < 5; ++i) z += p[i] = std::exp(double(target[i]));
  for (double& x : p) x /= z;
  SamplerParams plain;
  plain.temperature = 1;
  plain.top_k = 0;
  plain.top_p = 1;
  plain.min_p = 0;
  plain.seed = 1234;
  Sampler sampler(plain);
  SamplerParams draft_params = plain;
  draft_params.seed = 99;
  Sampler draft_sampler(draft_params);
  const std::vector<float> rows = rows_of({target, target});
  TokenProbs q;
  for (int32_t i = 0; i < 5; ++i) q.push_back({i, draft_dist[size_t(i)]});
  const int trials = 20000;
  std::vector<int> counts(5, 0);
  for (int t = 0; t < trials; ++t) {
    // The draft: drawn from q, or always token 1 (a deterministic draft).
    const int32_t token = with_draft_probs ? draft_sampler.draw(q) : 1;
    const std::vector<TokenProbs> probs = {q};
    const DraftVerdict v = check_draft(
        sampler, std::vector<int32_t>{token}, rows, 5,
        with_draft_probs ? std::span<const TokenProbs>(probs) : std::span<const TokenProbs>());
    ++counts[size_t(v.accepted == 1 ? token : v.next)];
  }
  double chi = 0;
  for (size_t i = 0; i < 5; ++i) {
    const double expected = p[i] * trials;
    chi += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi;
}

TEST(CheckDraft, SampledOutputKeepsTheTargetsDistribution) {
  EXPECT_LT(chi_square_of_first_tokens(true), 30.0);
  EXPECT_LT(chi_square_of_first_tokens(false), 30.0);
}

TEST(Sampler, DistributionIsWhatSampleDrawsFrom) {
  SamplerParams params;  // top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i) * 0.7f) * 4;
  Sampler a(params), b(params);
  TokenProbs probs;
  a.distribution(logits, probs);
  double sum = 0;
  for (const TokenProb& t : probs) sum += t.p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  // Every draw of sample() is a token of the distribution.
  for (int i = 0; i < 200; ++i) {
    const int32_t t = b.sample(logits);
    bool found = false;
    for (const TokenProb& e : probs) found = found || e.id == t;
    EXPECT_TRUE(found) << t;
  }
  SamplerParams greedy = params;
  greedy.temperature = 0;
  Sampler g(greedy);
  g.distribution(logits, probs);
  ASSERT_EQ(probs.size(), 1u);
  EXPECT_EQ(probs[0].id, engine::greedy(logits));
}

}  // namespace
}  // namespace herd::engine
