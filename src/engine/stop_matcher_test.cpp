#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace herd::engine {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopMatcher, NeverStreamsAStopString) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("hello </"), "hello ");  // "</" might start the stop string
  EXPECT_EQ(m.push("en"), "");
  EXPECT_EQ(m.push("d> more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, ReleasesHeldTextThatWasNotAStop) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(feed(m, {"a S", "T", "x", "y"}), "a STxy");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralStops) {
  StopMatcher m({"bb", "a"});
  EXPECT_EQ(feed(m, {"xxbbya"}), "xx");
  StopMatcher none({});
  EXPECT_EQ(feed(none, {"abc", "def"}), "abcdef");
}

}  // namespace
}  // namespace herd::engine
