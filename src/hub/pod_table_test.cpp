#include "hub/pod_table.h"

#include <gtest/gtest.h>

#include "net/identity.h"

namespace herd::hub {
namespace {

using Clock = PodTable::Clock;

Registration pod(const net::NodeIdentity& identity, const std::string& url,
                 std::vector<std::string> models = {"m"}, double decode = 30) {
  Registration r;
  r.id = identity.id();
  r.name = "pod";
  r.url = url;
  for (const std::string& m : models) r.models.push_back({m, 4096});
  r.slots = 2;
  r.decode_tokens_per_s = decode;
  r.prefill_tokens_per_s = decode * 20;
  return r;
}

TEST(PodTableTest, APodIsRoutedUntilItExpiresAndItsRecordStays) {
  PodTable table;
  const auto a = net::NodeIdentity::generate();
  const auto now = Clock::now();
  table.registered(pod(a, "http://a:1"), now);
  ASSERT_EQ(table.size(), 1u);
  const auto model = table.model("m");
  ASSERT_TRUE(model);
  EXPECT_FALSE(table.model("other"));
  EXPECT_EQ(table.serving(*model), 1u);
  EXPECT_EQ(table.record(a.id().to_text()).reputation, kNewReputation);

  const auto chosen = table.choose(*model, 10, 10, {}, {});
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->node, a.id().to_text());
  EXPECT_EQ(chosen->url, "http://a:1");
  EXPECT_EQ(table.find(a.id().to_text())->active, 1);
  table.finished(*chosen);
  EXPECT_EQ(table.find(a.id().to_text())->active, 0);

  // A verdict changes the record and what the router trusts.
  table.update_record(a.id().to_text(), [](PodRecord& r) {
    ++r.failed;
    r.reputation = kMinReputation / 2;
  });
  EXPECT_FALSE(table.choose(*model, 10, 10, {}, {}));
  EXPECT_TRUE(table.good_pods().empty());

  // Silent past the timeout: dropped, but its record stays and comes back with it.
  EXPECT_TRUE(table.expire(std::chrono::seconds(30), now + std::chrono::seconds(10)).empty());
  const auto dropped = table.expire(std::chrono::seconds(30), now + std::chrono::seconds(31));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], a.id().to_text());
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.serving(*model), 0u);
  table.registered(pod(a, "http://a:1"), now + std::chrono::seconds(40));
  EXPECT_EQ(table.record(a.id().to_text()).failed, 1);
  EXPECT_FALSE(table.choose(*model, 10, 10, {}, {}));
}

TEST(PodTableTest, WaryPodsAreChosenOnlyWhenNoOtherCanBeAndCheckersAreOthers) {
  const auto fast = net::NodeIdentity::generate();
  const auto slow = net::NodeIdentity::generate();
  PodTable table({slow.id().to_text()});  // a seed: it may check from the start
  const auto now = Clock::now();
  table.registered(pod(fast, "http://fast:1", {"m"}, 100), now);
  table.registered(pod(slow, "http://slow:1", {"m", "n"}, 10), now);
  const ModelId m = *table.model("m");
  const std::string wary[] = {fast.id().to_text()};
  auto chosen = table.choose(m, 10, 10, {}, {});
  EXPECT_EQ(chosen->node, fast.id().to_text());
  table.finished(*chosen);
  chosen = table.choose(m, 10, 10, {}, wary);
  EXPECT_EQ(chosen->node, slow.id().to_text());
  table.finished(*chosen);
  const PodId excluded[] = {chosen->pod};
  chosen = table.choose(m, 10, 10, excluded, wary);  // the wary one, as no other can
  EXPECT_EQ(chosen->node, fast.id().to_text());

  const auto checkers = table.checkers("m", fast.id().to_text());
  ASSERT_EQ(checkers.size(), 1u);
  EXPECT_EQ(checkers[0].url, "http://slow:1");
  // The fresh pod checks no one until it passed a check of a pod that may check.
  EXPECT_TRUE(table.checkers("m", slow.id().to_text()).empty());
  table.update_record(fast.id().to_text(), [](PodRecord& r) {
    ++r.checked;
    ++r.passed;
    ++r.qualified_passes;
  });
  EXPECT_EQ(table.checkers("m", slow.id().to_text()).size(), 1u);
  EXPECT_TRUE(table.checkers("n", slow.id().to_text()).empty());
  EXPECT_EQ(table.others_serving(slow.id().to_text()), 0);  // "n" has no other
  EXPECT_EQ(table.others_serving(fast.id().to_text()), 1);
}

}  // namespace
}  // namespace herd::hub
