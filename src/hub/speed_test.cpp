#include "hub/speed.h"

#include <gtest/gtest.h>

#include "hub/router.h"

namespace herd::hub {
namespace {

TEST(SpeedTest, AClaimIsCappedUntilMeasuredThenTheMeasureRules) {
  MeasuredSpeed m;
  // Unmeasured: 1e6 tok/s claimed is believed as the cap; an honest 40 as 40.
  RoutedSpeed r = routed_speed(m, 1e6, 1e6, 0);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s, kMaxUnmeasuredTokensPerS);
  EXPECT_DOUBLE_EQ(r.prefill_tokens_per_s, 1e6 * kMaxUnmeasuredTokensPerS / 1e6);
  // Once a pod of its model was measured: a trial's worth above the fastest.
  r = routed_speed(m, 1e6, 1e6, 30);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s, kTrialFactor * 30);
  r = routed_speed(m, 40, 800, 0);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s, 40);
  EXPECT_DOUBLE_EQ(r.prefill_tokens_per_s, 800);
  // Too short to measure: ignored.
  m.observe(2, 0.01);
  m.observe(100, 0);
  EXPECT_EQ(m.samples, 0);
  // Measured: 20 tok/s, then a moving average; the claim never raises it.
  m.observe(40, 2.0);
  EXPECT_DOUBLE_EQ(m.tokens_per_s, 20);
  r = routed_speed(m, 1e6, 1e6, 1000);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s, 20);
  EXPECT_DOUBLE_EQ(r.prefill_tokens_per_s, 20);
  m.observe(40, 1.0);
  EXPECT_DOUBLE_EQ(m.tokens_per_s, kSmoothing * 40 + (1 - kSmoothing) * 20);
  // A pod claiming less than it does is believed as it says.
  EXPECT_DOUBLE_EQ(routed_speed(m, 10, 100, 0).decode_tokens_per_s, 10);
}

// The router, told the routed speeds, sends a claimed 1e6 tok/s pod no more than an honest
// pod of the same measured speed once both were measured.
TEST(SpeedTest, TheRouterPrefersTheFasterMeasureNotTheBiggerClaim) {
  Router router;
  MeasuredSpeed liar, honest;
  liar.observe(20, 2.0);    // 10 tok/s measured
  honest.observe(60, 2.0);  // 30 tok/s measured
  auto report = [](const RoutedSpeed& s) {
    PodReport p;
    p.models = {0};
    p.slots = 1;
    p.decode_tokens_per_s = s.decode_tokens_per_s;
    p.prefill_tokens_per_s = s.prefill_tokens_per_s;
    return p;
  };
  const PodId l = router.add(report(routed_speed(liar, 1e6, 1e6, 30)), 0.001);
  const PodId h = router.add(report(routed_speed(honest, 30, 600, 30)), 0.001);
  EXPECT_EQ(router.route(RouteRequest{0, 100, 64}), h);
  EXPECT_NE(router.route(RouteRequest{0, 100, 64}), l);
}

}  // namespace
}  // namespace herd::hub
