#include "http/bounded_json.h"

#include <gtest/gtest.h>

namespace herd::http {
namespace {

std::string nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(BoundedJson, ParsesWithinTheLimit) {
  std::string problem;
  const nlohmann::json v = parse_bounded_json(R"({"a": [1, {"b": "c"}], "d": null})", &problem);
  ASSERT_FALSE(v.is_discarded()) << problem;
  EXPECT_EQ(v["a"][1]["b"], "c");
  EXPECT_FALSE(parse_bounded_json(nested(kMaxJsonDepth)).is_discarded());
  const auto ordered = parse_bounded_json<nlohmann::ordered_json>(R"({"z": 1, "a": 2})");
  EXPECT_EQ(ordered.begin().key(), "z");
}

TEST(BoundedJson, RefusesOneLevelTooDeep) {
  std::string problem;
  EXPECT_TRUE(parse_bounded_json(nested(kMaxJsonDepth + 1), &problem).is_discarded());
  EXPECT_EQ(problem, "the JSON nests deeper than 64 levels");
  problem.clear();
  EXPECT_TRUE(parse_bounded_json(R"({"a": {"b": {"c": 1}}})", &problem, 2).is_discarded());
  EXPECT_NE(problem.find("deeper than 2"), std::string::npos);
}

// The body that crashed serve and the hub: 400 KB of '[' (200000 levels, never closed).
// Refused quickly and without a deep value (nothing to overflow a stack on).
TEST(BoundedJson, RefusesAHugeDepthWithoutBuildingIt) {
  std::string problem;
  EXPECT_TRUE(parse_bounded_json(std::string(400000, '['), &problem).is_discarded());
  EXPECT_NE(problem.find("deeper than 64"), std::string::npos);
  EXPECT_TRUE(parse_bounded_json(nested(200000), &problem).is_discarded());
}

TEST(BoundedJson, NamesInvalidJson) {
  std::string problem;
  EXPECT_TRUE(parse_bounded_json(R"({"a": )", &problem).is_discarded());
  EXPECT_NE(problem.find("not valid"), std::string::npos) << problem;
  EXPECT_TRUE(parse_bounded_json("", &problem).is_discarded());
  EXPECT_TRUE(parse_bounded_json("[1] x", &problem).is_discarded());
  EXPECT_EQ(json_problem("[1, 2]"), "");
}

}  // namespace
}  // namespace herd::http
