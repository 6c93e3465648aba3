#include "hub/rate_limit.h"

#include <gtest/gtest.h>

namespace herd::hub {
namespace {

using namespace std::chrono_literals;

TEST(RateLimitTest, EachKeyHasItsBurstThenItsRate) {
  RateLimit limit(60, 3);  // one a second, three at once
  const auto t0 = RateLimit::Clock::time_point{} + 100s;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limit.take("a", t0), 0) << i;
  EXPECT_NEAR(limit.take("a", t0), 1.0, 1e-9);  // the fourth waits a second
  EXPECT_EQ(limit.take("b", t0), 0);            // another key has its own bucket
  EXPECT_NEAR(limit.take("a", t0 + 500ms), 0.5, 1e-9);
  EXPECT_EQ(limit.take("a", t0 + 1000ms), 0);
  EXPECT_GT(limit.take("a", t0 + 1000ms), 0);
  // Idle, the bucket fills up to its burst, no more.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limit.take("a", t0 + 60s), 0) << i;
  EXPECT_GT(limit.take("a", t0 + 60s), 0);
}

TEST(RateLimitTest, ManyKeysAreForgottenOnceTheirBucketsAreFull) {
  RateLimit limit(60, 2);
  const auto t0 = RateLimit::Clock::time_point{} + 100s;
  for (size_t i = 0; i < RateLimit::kPruneAbove; ++i) limit.take("k" + std::to_string(i), t0);
  EXPECT_EQ(limit.keys(), RateLimit::kPruneAbove);  // all still within their second
  limit.take("late", t0 + 10s);                     // the others have refilled: forgotten
  EXPECT_LE(limit.keys(), 2u);
  // A key still waiting for its bucket is kept, and still limited.
  limit.take("busy", t0 + 20s);
  limit.take("busy", t0 + 20s);
  for (size_t i = 0; i < RateLimit::kPruneAbove; ++i) limit.take("x" + std::to_string(i), t0 + 20s);
  EXPECT_GT(limit.keys(), RateLimit::kPruneAbove);  // pruned once, none full
  EXPECT_GT(limit.take("busy", t0 + 20s), 0);
}

TEST(RateLimitTest, ZeroMeansNoLimit) {
  RateLimit none(0);
  EXPECT_FALSE(none.limited());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(none.take("a"), 0);
}

}  // namespace
}  // namespace herd::hub
