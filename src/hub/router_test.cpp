#include "hub/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

PodReport pod(std::vector<ModelId> models, double decode, int32_t slots = 1, double prefill = 0) {
  PodReport r;
  r.models = std::move(models);
  r.slots = slots;
  r.decode_tokens_per_s = decode;
  r.prefill_tokens_per_s = prefill > 0 ? prefill : decode * 20;
  return r;
}

RouteRequest typical(ModelId model) {
  return RouteRequest{model, kTypicalPromptTokens, kTypicalMaxTokens};
}

TEST(RouterTest, TheFastestIdlePodWinsAndTheRoundTripCounts) {
  Router router;
  const PodId slow = router.add(pod({0}, 10), 0.01);
  const PodId fast = router.add(pod({0}, 40), 0.01);
  EXPECT_EQ(router.route(typical(0)), fast);
  // 512 / 800 + 256 / 40 + 0.01 = 7.05 s by hand.
  EXPECT_NEAR(router.predicted_seconds(fast, 512, 256), 0.64 + 6.4 + 0.01, 1e-9);
  // A one-token answer: 2 s more of round trip outweighs 4x the speed.
  router.set_rtt(fast, 2.0);
  EXPECT_EQ(router.route(RouteRequest{0, 8, 1}), slow);
  EXPECT_EQ(router.route(RouteRequest{1, 8, 1}), std::nullopt);  // nobody serves model 1
}

TEST(RouterTest, ABusyPodWaitsForASlot) {
  Router router;
  const PodId fast = router.add(pod({0}, 40, 2), 0.01);
  const PodId slow = router.add(pod({0}, 30, 1), 0.01);
  router.started(fast);  // one of its two slots: still no wait
  EXPECT_EQ(router.route(typical(0)), fast);
  router.started(fast);  // both: the next waits about half a typical request (3.5 s)
  EXPECT_EQ(router.route(typical(0)), slow);
  EXPECT_EQ(router.active(fast), 2);
  router.finished(fast);
  EXPECT_EQ(router.route(typical(0)), fast);
}

TEST(RouterTest, ReputationWeighsAndDistrustStops) {
  Router router;
  const PodId a = router.add(pod({0}, 40), 0.01);
  const PodId b = router.add(pod({0}, 30), 0.01);
  EXPECT_EQ(router.route(typical(0)), a);
  router.set_reputation(a, 0.5);  // its 7 s count as 14
  EXPECT_EQ(router.route(typical(0)), b);
  router.set_reputation(b, kMinReputation / 2);  // distrusted: a however slow it looks
  EXPECT_EQ(router.route(typical(0)), a);
  router.set_reputation(a, 0.0);
  EXPECT_EQ(router.route(typical(0)), std::nullopt);
  router.set_reputation(a, std::numeric_limits<double>::quiet_NaN());  // NaN: distrust
  EXPECT_EQ(router.route(typical(0)), std::nullopt);
}

TEST(RouterTest, ExcludedAndRemovedPodsAreNotChosen) {
  Router router;
  const PodId a = router.add(pod({0, 1}, 40), 0.01);
  const PodId b = router.add(pod({0}, 30), 0.01);
  const std::vector<PodId> failed = {a};
  EXPECT_EQ(router.route(RouteRequest{0, 512, 256, failed}), b);
  EXPECT_EQ(router.route(RouteRequest{1, 512, 256, failed}), std::nullopt);
  router.remove(a);
  EXPECT_FALSE(router.live(a));
  EXPECT_EQ(router.size(), 1u);
  EXPECT_EQ(router.route(typical(1)), std::nullopt);
  EXPECT_EQ(router.route(typical(0)), b);
  const PodId c = router.add(pod({1}, 5), 0.01);
  EXPECT_EQ(c, a);  // ids are reused
  EXPECT_EQ(router.route(typical(1)), c);
  // A heartbeat that changes the models moves the pod between them.
  router.update(c, pod({2}, 5));
  EXPECT_EQ(router.route(typical(1)), std::nullopt);
  EXPECT_EQ(router.route(typical(2)), c);
}

TEST(RouterTest, BadReportsAreRefusedNamingTheField) {
  Router router;
  const auto refused = [&](const PodReport& r, const std::string& field) {
    EXPECT_THAT([&] { router.add(r, 0.01); },
                ThrowsMessage<Error>(HasSubstr("pod report: field '" + field + "'")));
  };
  refused(pod({}, 10), "models");
  refused(pod({3, 3}, 10), "models");
  refused(pod(std::vector<ModelId>(kMaxModelsPerPod + 1, 0), 10), "models");
  refused(pod({0}, 10, 0), "slots");
  refused(pod({0}, 10, kMaxSlots + 1), "slots");
  refused(pod({0}, std::numeric_limits<double>::quiet_NaN()), "decode_tokens_per_s");
  refused(pod({0}, -1), "decode_tokens_per_s");
  refused(pod({0}, 10, 1, std::numeric_limits<double>::infinity()), "prefill_tokens_per_s");
  EXPECT_THAT([&] { router.add(pod({0}, 10), -1); },
              ThrowsMessage<Error>(HasSubstr("field 'rtt'")));
  EXPECT_EQ(router.size(), 0u);
}

// After random joins, departures, heartbeats and requests starting and ending, a typical
// request goes where a search of every pod says it should (the index stays true).
TEST(RouterTest, TheIndexAgreesWithASearchOfEveryPod) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> speed(5, 80), rtt(0.001, 0.2), unit(0, 1);
  Router router;
  struct Known {
    std::vector<ModelId> models;
    double reputation;
  };
  std::map<PodId, Known> live;
  const auto any = [&] { return std::next(live.begin(), static_cast<long>(rng() % live.size())); };
  const int kModels = 4;
  for (int step = 0; step < 5000; ++step) {
    const double r = unit(rng);
    if (live.size() < 5 || r < 0.3) {
      std::vector<ModelId> models = {static_cast<ModelId>(rng() % kModels)};
      if (unit(rng) < 0.5) models.push_back((models[0] + 1) % kModels);
      const double reputation = 0.5 + unit(rng) / 2;
      const PodId id = router.add(pod(models, speed(rng), 1 + static_cast<int32_t>(rng() % 4)),
                                  rtt(rng), reputation);
      live[id] = {models, reputation};
    } else if (r < 0.4) {
      auto it = any();
      router.remove(it->first);
      live.erase(it);
    } else if (r < 0.5) {
      auto it = any();
      it->second.models = {static_cast<ModelId>(rng() % kModels)};
      router.update(it->first, pod(it->second.models, speed(rng), 2));
    } else if (r < 0.8) {
      router.started(any()->first);
    } else {
      router.finished(any()->first);
    }
    const ModelId model = static_cast<ModelId>(rng() % kModels);
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [id, known] : live) {
      if (std::find(known.models.begin(), known.models.end(), model) == known.models.end())
        continue;
      best = std::min(best, router.predicted_seconds(id, kTypicalPromptTokens, kTypicalMaxTokens) /
                                known.reputation);
    }
    const std::optional<PodId> chosen = router.route(typical(model));
    ASSERT_EQ(chosen.has_value(), std::isfinite(best)) << "step " << step;
    if (!chosen) continue;
    ASSERT_TRUE(router.live(*chosen));
    EXPECT_DOUBLE_EQ(router.predicted_seconds(*chosen, kTypicalPromptTokens, kTypicalMaxTokens) /
                         live.at(*chosen).reputation,
                     best)
        << "step " << step;
  }
}

}  // namespace
}  // namespace herd::hub
