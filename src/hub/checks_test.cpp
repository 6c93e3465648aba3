#include "hub/checks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hub/router.h"

namespace herd::hub {
namespace {

using json = nlohmann::json;

TEST(ChecksTest, IdsTheCheckerCannotScoreFailTheCheck) {
  const Verdict v =
      judge(json{{"unscorable", "12 ids beyond the context of 8"}}, 12, CheckThresholds{});
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.tokens, 12);
  EXPECT_EQ(v.implausible, 12);
  EXPECT_EQ(v.detail, "the ids cannot be scored: 12 ids beyond the context of 8");
}

// Sampled draws as likely as honest ones: n tokens of two equal choices each.
json sampled_scores(size_t n, double probability) {
  json scores = json::array();
  for (size_t i = 0; i < n; ++i) {
    scores.push_back({{"token", 1},
                      {"probability", probability},
                      {"gap", 0},
                      {"entropy", std::log(2.0)},
                      {"variance", 0.0}});
  }
  return {{"temperature", 0.8}, {"scores", scores}};
}

TEST(ChecksTest, APassOfFewSampledTokensIsInconclusive) {
  const CheckThresholds t;
  Verdict v = judge(sampled_scores(15, 0.5), 15, t);
  EXPECT_TRUE(v.passed);
  EXPECT_FALSE(v.conclusive);
  v = judge(sampled_scores(16, 0.5), 16, t);
  EXPECT_TRUE(v.passed);
  EXPECT_TRUE(v.conclusive);
  // A failure is proof at any length; a greedy pass too.
  v = judge(sampled_scores(2, 1e-12), 2, t);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(v.conclusive);
  json greedy = sampled_scores(1, 1.0);
  greedy["temperature"] = 0;
  v = judge(greedy, 1, t);
  EXPECT_TRUE(v.passed);
  EXPECT_TRUE(v.conclusive);
}

TEST(ChecksTest, TheTextSentMustBeTheIdsText) {
  EXPECT_EQ(text_mismatch(" Paris.\n", json{{"content", "Paris."}}), "");
  EXPECT_EQ(text_mismatch("anything", json{{"scores", json::array()}}), "");  // not rendered
  const std::string why = text_mismatch("Buy pills now", json{{"content", "Paris."}});
  EXPECT_NE(why.find("'Buy pills now'"), std::string::npos) << why;
  EXPECT_NE(why.find("'Paris.'"), std::string::npos) << why;
}

TEST(ChecksTest, ReputationFollowsTheCountsAndOnlyQualifiedPodsCheck) {
  PodCounts fresh;
  EXPECT_DOUBLE_EQ(reputation_of(fresh, false), kNewReputation);
  EXPECT_DOUBLE_EQ(reputation_of(fresh, true), 1.0);
  EXPECT_FALSE(may_check(fresh, false));  // a new identity checks no one
  EXPECT_TRUE(may_check(fresh, true));    // a seed the operator named does
  // Passes vouched by a sybil partner (not qualified) do not make a checker.
  PodCounts vouched;
  vouched.checked = vouched.passed = 4;
  EXPECT_DOUBLE_EQ(reputation_of(vouched, false), 0.9);
  EXPECT_FALSE(may_check(vouched, false));
  PodCounts proven = vouched;
  proven.qualified_passes = 1;
  EXPECT_TRUE(may_check(proven, false));
  // One failure: below kMinReputation for good, whatever it passed.
  PodCounts caught = proven;
  caught.failed = 1;
  caught.passed = 100;
  EXPECT_LT(reputation_of(caught, false), kMinReputation);
  EXPECT_FALSE(may_check(caught, false));
  EXPECT_FALSE(may_check(caught, true));
  // Overruled by the majority: a new checker twice, a seed three times, and it checks no more.
  proven.overruled = 1;
  EXPECT_TRUE(may_check(proven, false));
  proven.overruled = 2;
  EXPECT_FALSE(may_check(proven, false));
  PodCounts seed;
  seed.overruled = 2;
  EXPECT_TRUE(may_check(seed, true));
  seed.overruled = 3;
  EXPECT_FALSE(may_check(seed, true));
}

TEST(ChecksTest, FailuresAreConfirmedAndTheMajorityOverrulesACheckerThatDisagrees) {
  const Vote pass_a{"a", true}, pass_b{"b", true}, fail_b{"b", false}, fail_a{"a", false},
      fail_c{"c", false}, pass_c{"c", true};
  // One checker: a failure is always confirmed; a pass when sampled (or the pod's first).
  EXPECT_TRUE(wants_another(std::vector<Vote>{fail_a}, false));
  EXPECT_FALSE(wants_another(std::vector<Vote>{pass_a}, false));
  EXPECT_TRUE(wants_another(std::vector<Vote>{pass_a}, true));
  // Two that agree: done; that disagree: a third decides.
  EXPECT_FALSE(wants_another(std::vector<Vote>{pass_a, pass_b}, true));
  EXPECT_TRUE(wants_another(std::vector<Vote>{pass_a, fail_b}, true));
  EXPECT_FALSE(wants_another(std::vector<Vote>{pass_a, fail_b, pass_c}, true));

  EXPECT_FALSE(decide({}).decided);
  Decision d = decide(std::vector<Vote>{fail_a, fail_b});
  EXPECT_TRUE(d.decided);
  EXPECT_FALSE(d.passed);
  EXPECT_TRUE(d.overruled.empty());
  // A lying checker (a sybil's partner passing it) is overruled by the other two.
  d = decide(std::vector<Vote>{pass_a, fail_b, fail_c});
  EXPECT_FALSE(d.passed);
  EXPECT_EQ(d.overruled, std::vector<std::string>{"a"});
  // A lone accuser with no third checker is not believed, nor punished.
  d = decide(std::vector<Vote>{fail_a, pass_b});
  EXPECT_TRUE(d.passed);
  EXPECT_TRUE(d.overruled.empty());
  d = decide(std::vector<Vote>{fail_a, pass_b, pass_c});
  EXPECT_TRUE(d.passed);
  EXPECT_EQ(d.overruled, std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace herd::hub
