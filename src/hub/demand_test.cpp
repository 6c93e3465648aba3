#include "hub/demand.h"

#include <gtest/gtest.h>

namespace herd::hub {
namespace {

using Clock = Demand::Clock;
using std::chrono::seconds;

DemandOptions options() {
  DemandOptions o;
  o.load_after = 3;
  o.window = seconds(60);
  o.load_timeout = seconds(120);
  return o;
}

TEST(DemandTest, RequestsAreCountedInASlidingWindowPerModel) {
  Demand d(options());
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(d.record("b", t0), 1);
  EXPECT_EQ(d.record("b", t0 + seconds(10)), 2);
  EXPECT_EQ(d.record("c", t0 + seconds(10)), 1);  // another model: its own count
  EXPECT_EQ(d.count("b", t0 + seconds(30)), 2);
  EXPECT_EQ(d.count("b", t0 + seconds(65)), 1);  // the first left the window
  EXPECT_EQ(d.record("b", t0 + seconds(65)), 2);
  EXPECT_EQ(d.count("b", t0 + seconds(200)), 0);
  EXPECT_EQ(d.record("b", t0 + seconds(200)), 1);
  EXPECT_EQ(d.count("nobody-asked", t0), 0);
}

TEST(DemandTest, TrackedModelsAreBounded) {
  Demand d(options());
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < kMaxTrackedModels; ++i) EXPECT_EQ(d.record(std::to_string(i), t0), 1);
  EXPECT_EQ(d.record("one-too-many", t0 + seconds(1)), 0);  // not counted
  EXPECT_EQ(d.record("0", t0 + seconds(1)), 2);             // tracked ones still are
  // Once the window passed, old names make room.
  EXPECT_EQ(d.record("one-too-many", t0 + seconds(61)), 1);
}

TEST(DemandTest, PodsSayWhatTheyCanLoadAndKeepTheirToken) {
  Demand d(options());
  const std::string token = d.pod_registered("pod-1", {"b", "c"}, {"a"});
  EXPECT_EQ(token.size(), 43u);  // 32 bytes, URL-safe base64
  EXPECT_EQ(d.token("pod-1"), token);
  EXPECT_EQ(d.pod_registered("pod-1", {"c"}, {"a"}), token);  // the heartbeat: the same
  EXPECT_NE(d.pod_registered("pod-2", {"c"}, {"a"}), token);  // another pod: its own
  EXPECT_TRUE(d.pods_that_can_load("b").empty());
  EXPECT_EQ(d.pods_that_can_load("c"), (std::vector<std::string>{"pod-1", "pod-2"}));
  d.pod_dropped("pod-1");
  EXPECT_EQ(d.token("pod-1"), "");
  EXPECT_EQ(d.pods_that_can_load("c"), std::vector<std::string>{"pod-2"});
  EXPECT_TRUE(d.loadable("pod-1").empty());
  // Back after it was dropped: a new token.
  EXPECT_NE(d.pod_registered("pod-1", {"c"}, {"a"}), token);
}

TEST(DemandTest, ALoadEndsWhenThePodServesTheModelFailsOrTimesOut) {
  Demand d(options());
  const Clock::time_point t0 = Clock::now();
  d.pod_registered("pod-1", {"b"}, {"a"});
  d.record("b", t0);
  d.start("b", "pod-1", 7, t0);
  ASSERT_TRUE(d.load_of("b", t0 + seconds(1)));
  EXPECT_EQ(d.load_of("b", t0)->pod, "pod-1");
  EXPECT_EQ(d.loading_on("pod-1"), "b");
  EXPECT_EQ(d.loading_pods(), std::vector<PodId>{7});
  EXPECT_EQ(d.view(t0)["loads"].size(), 1u);
  d.pod_registered("pod-1", {"b"}, {"a"});  // a heartbeat during the load: still loading
  EXPECT_TRUE(d.load_of("b", t0 + seconds(2)));
  d.pod_registered("pod-1", {"a"}, {"b"});  // it serves b now: done, and b's demand met
  EXPECT_FALSE(d.load_of("b", t0 + seconds(3)));
  EXPECT_EQ(d.loading_on("pod-1"), "");
  EXPECT_EQ(d.count("b", t0 + seconds(3)), 0);

  d.start("a", "pod-1", 7, t0);
  d.failed("a", "pod-1", t0 + seconds(1));
  EXPECT_FALSE(d.load_of("a", t0 + seconds(1)));
  EXPECT_TRUE(d.refused_recently("a", "pod-1", t0 + seconds(30)));
  EXPECT_FALSE(d.refused_recently("a", "pod-2", t0 + seconds(30)));
  EXPECT_FALSE(d.refused_recently("a", "pod-1", t0 + seconds(90)));

  d.start("c", "pod-1", 7, t0);
  EXPECT_TRUE(d.load_of("c", t0 + seconds(119)));
  EXPECT_FALSE(d.load_of("c", t0 + seconds(121)));  // given up
  EXPECT_TRUE(d.refused_recently("c", "pod-1", t0 + seconds(122)));

  d.start("c", "pod-1", 7, t0);
  d.pod_dropped("pod-1");  // gone: its load with it
  EXPECT_FALSE(d.load_of("c", t0));
}

TEST(DemandTest, TheLoaderIsIdleAndItsModelServedElsewhere) {
  EXPECT_FALSE(choose_loader({}));
  std::vector<LoadCandidate> c = {{"busy", 2, 4, 3}, {"idle-alone", 0, 4, 0}};
  EXPECT_EQ(choose_loader(c), 1u);  // idle first, even when its model has no other pod
  c.push_back({"idle-shared", 0, 4, 1});
  EXPECT_EQ(choose_loader(c), 2u);  // idle, and its model still served by another
  c = {{"a", 3, 4, 1}, {"b", 1, 4, 1}, {"c", 1, 1, 1}};
  EXPECT_EQ(choose_loader(c), 1u);  // all busy: the least (1 of 4 slots)
  c = {{"z", 0, 4, 1}, {"y", 0, 4, 1}};
  EXPECT_EQ(choose_loader(c), 1u);  // ties: by id, so the choice is the same every time
}

}  // namespace
}  // namespace herd::hub
