#include "hub/answer_limits.h"

#include <gtest/gtest.h>

namespace herd::hub {
namespace {

using json = nlohmann::json;

TEST(AnswerLimitsTest, TokenBoundIsMaxTokensWithinTheContext) {
  EXPECT_EQ(answer_token_bound(16, 0), 16);
  EXPECT_EQ(answer_token_bound(16, 8), 8);
  EXPECT_EQ(answer_token_bound(-1, 4096), 4096);
  EXPECT_EQ(answer_token_bound(-1, 0), kMaxAnswerTokens);
  EXPECT_EQ(answer_token_bound(int64_t{1} << 40, 0), kMaxAnswerTokens);
}

TEST(AnswerLimitsTest, CompletionCapGrowsWithTokensAndLogprobs) {
  const json plain = {{"model", "m"}};
  const json logprobs = {{"model", "m"}, {"logprobs", true}, {"top_logprobs", 20}};
  const AnswerLimits one = completion_answer_limits(plain, 1, 10, 0);
  const AnswerLimits many = completion_answer_limits(plain, 1000, 10, 0);
  const AnswerLimits with_lp = completion_answer_limits(logprobs, 1000, 10, 0);
  EXPECT_GT(one.max_bytes, size_t{1} << 20);
  EXPECT_LT(one.max_bytes, size_t{2} << 20);
  EXPECT_GE(many.max_bytes, (size_t{1} << 20) + 1000 * 2048);
  EXPECT_GE(with_lp.max_bytes, many.max_bytes + 1000 * 8192);
  // A completion's integer logprobs count as well.
  EXPECT_EQ(completion_answer_limits({{"model", "m"}, {"logprobs", 5}}, 1000, 10, 0).max_bytes,
            with_lp.max_bytes);
  EXPECT_LT(one.deadline, many.deadline);
  EXPECT_GE(one.deadline, std::chrono::seconds(120));
}

TEST(AnswerLimitsTest, CompletionCapHasACeiling) {
  const json huge_model = {{"model", std::string(1 << 20, 'm')}, {"logprobs", true}};
  const AnswerLimits most = completion_answer_limits(huge_model, -1, 1 << 20, 0);
  EXPECT_EQ(most.max_bytes, kMaxAnswerBytes);
  EXPECT_EQ(most.deadline, std::chrono::seconds(3600));
  // The context bounds an answer without max_tokens.
  EXPECT_LT(completion_answer_limits({{"model", "m"}}, -1, 10, 512).max_bytes, size_t{3} << 20);
}

TEST(AnswerLimitsTest, VerifyCapGrowsWithIds) {
  EXPECT_LT(verify_answer_limits(1).max_bytes, verify_answer_limits(1000).max_bytes);
  EXPECT_LE(verify_answer_limits(size_t{1} << 40).max_bytes, kMaxAnswerBytes + (1 << 20));
}

}  // namespace
}  // namespace herd::hub
