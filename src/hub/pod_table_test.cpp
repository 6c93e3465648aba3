#include "hub/pod_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "net/identity.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using Clock = PodTable::Clock;
using namespace std::chrono_literals;

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

// Registers `r` at its URL's address as given (no resolving here).
std::string add(PodTable& table, const Registration& r, Clock::time_point now) {
  PodAddress address = parse_pod_url(r.url);
  address.ip = "192.0.2.1";
  return table.registered(r, address, now);
}

TEST(PodTableTest, APodIsRoutedUntilItExpiresAndARecordWithHistoryStays) {
  PodTable table;
  const auto a = net::NodeIdentity::generate();
  const std::string id = a.id().to_text();
  const auto now = Clock::now();
  EXPECT_EQ(add(table, pod(a, "http://a:1"), now), "");
  ASSERT_EQ(table.size(), 1u);
  EXPECT_TRUE(table.model("m"));
  EXPECT_FALSE(table.model("other"));
  EXPECT_EQ(table.serving("m"), 1u);
  EXPECT_EQ(table.record(id).reputation, kNewReputation);

  const auto chosen = table.choose("m", 10, 10, {}, {});
  ASSERT_TRUE(chosen);
  EXPECT_EQ(chosen->node, id);
  EXPECT_EQ(chosen->url, "http://a:1");
  EXPECT_EQ(chosen->address.ip, "192.0.2.1");  // where the hub connects: the pinned address
  EXPECT_EQ(table.find(id)->active, 1);
  table.finished(*chosen);
  EXPECT_EQ(table.find(id)->active, 0);

  // A verdict changes the record and what the router trusts.
  table.count_served(id, 5, 0.1);
  table.update_record(id, [](PodRecord& r) {
    ++r.checked;
    ++r.failed;
    r.reputation = kMinReputation / 2;
  });
  EXPECT_FALSE(table.choose("m", 10, 10, {}, {}));
  EXPECT_TRUE(table.good_pods().empty());

  // Silent past the timeout: dropped, but its record stays and comes back with it.
  EXPECT_TRUE(table.expire(30s, now + 10s).empty());
  const auto dropped = table.expire(30s, now + 31s);
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], id);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.serving("m"), 0u);
  EXPECT_EQ(table.records(), 1u);
  EXPECT_EQ(add(table, pod(a, "http://a:1"), now + 40s), "");
  EXPECT_EQ(table.record(id).failed, 1);
  EXPECT_FALSE(table.choose("m", 10, 10, {}, {}));
}

TEST(PodTableTest, WaryPodsAreChosenOnlyWhenNoOtherCanBeAndCheckersAreOthers) {
  const auto fast = net::NodeIdentity::generate();
  const auto slow = net::NodeIdentity::generate();
  PodTable table({slow.id().to_text()});  // a seed: it may check from the start
  const auto now = Clock::now();
  add(table, pod(fast, "http://fast:1", {"m"}, 100), now);
  add(table, pod(slow, "http://slow:1", {"m", "n"}, 10), now);
  const std::string wary[] = {fast.id().to_text()};
  auto chosen = table.choose("m", 10, 10, {}, {});
  EXPECT_EQ(chosen->node, fast.id().to_text());
  table.finished(*chosen);
  chosen = table.choose("m", 10, 10, {}, wary);
  EXPECT_EQ(chosen->node, slow.id().to_text());
  table.finished(*chosen);
  const PodId excluded[] = {chosen->pod};
  chosen = table.choose("m", 10, 10, excluded, wary);  // the wary one, as no other can
  EXPECT_EQ(chosen->node, fast.id().to_text());

  const auto checkers = table.checkers("m", fast.id().to_text());
  ASSERT_EQ(checkers.size(), 1u);
  EXPECT_EQ(checkers[0].address.host, "slow");
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

TEST(PodTableTest, OneIdentityServesOneUrlAtATime) {
  PodTable table;
  const auto a = net::NodeIdentity::generate();
  const auto now = Clock::now();
  EXPECT_EQ(add(table, pod(a, "http://one:1"), now), "");
  const std::string conflict = add(table, pod(a, "http://two:2"), now + 1s);
  EXPECT_THAT(conflict, HasSubstr("is live at http://one:1"));
  EXPECT_THAT(conflict, HasSubstr("cannot also register http://two:2"));
  EXPECT_EQ(table.find(a.id().to_text())->registration.url, "http://one:1");
  // Once the first is silent past the timeout, the pod may register where it is now.
  table.expire(30s, now + 31s);
  EXPECT_EQ(add(table, pod(a, "http://two:2"), now + 32s), "");
}

TEST(PodTableTest, PodsThatComeAndGoLeaveNothingBehind) {
  PodTable table;
  const auto now = Clock::now();
  std::vector<std::string> names;
  for (int i = 0; i < 64; ++i) names.push_back("model-" + std::to_string(i));
  for (int round = 0; round < 3; ++round) {
    const auto t = now + std::chrono::seconds(100 * round);
    for (int i = 0; i < 50; ++i) {
      std::vector<std::string> mine;
      for (const std::string& n : names) mine.push_back(n + "-" + std::to_string(round * 50 + i));
      const auto identity = net::NodeIdentity::generate();
      ASSERT_EQ(add(table, pod(identity, "http://p:1", mine), t), "");
    }
    EXPECT_EQ(table.size(), 50u);
    EXPECT_EQ(table.model_names(), 50u * 64);
    EXPECT_EQ(table.expire(30s, t + 31s).size(), 50u);
    // Nothing served, nothing checked: no record kept, no name known.
    EXPECT_EQ(table.records(), 0u);
    EXPECT_EQ(table.model_names(), 0u);
  }
  // A model id freed is given to the next name, which routes only to its own pods.
  const auto a = net::NodeIdentity::generate();
  const auto b = net::NodeIdentity::generate();
  add(table, pod(a, "http://a:1", {"x"}), now + 1000s);
  add(table, pod(b, "http://b:1", {"y", "x"}), now + 1000s);
  EXPECT_EQ(add(table, pod(b, "http://b:1", {"y"}), now + 1001s), "");  // b stops serving x
  EXPECT_EQ(table.serving("x"), 1u);
  EXPECT_EQ(table.choose("x", 1, 1, {}, {})->node, a.id().to_text());
  EXPECT_EQ(table.choose("y", 1, 1, {}, {})->node, b.id().to_text());
  EXPECT_EQ(table.model_names(), 2u);
}

}  // namespace
}  // namespace herd::hub
