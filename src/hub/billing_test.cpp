#include "hub/billing.h"

#include <gtest/gtest.h>

namespace herd::hub {
namespace {

AnswerFacts answer(int64_t prompt, int64_t completion, size_t ids) {
  AnswerFacts f;
  f.prompt_tokens = prompt;
  f.completion_tokens = completion;
  f.token_ids.assign(ids, 7);
  return f;
}

TEST(BillingTest, AnHonestAnswerIsBilledAsItSays) {
  const Billed b = bill(answer(12, 5, 5), 100, 8, 4096);
  EXPECT_EQ(b.prompt_tokens, 12);
  EXPECT_EQ(b.completion_tokens, 5);
  EXPECT_EQ(b.fault, "");
  // No tokens at all (an end at once): nothing to bill, nothing wrong.
  EXPECT_EQ(bill(answer(12, 0, 0), 100, 8, 4096).fault, "");
}

TEST(BillingTest, InflatedCountsAreCappedAndAreAFault) {
  // 200000 completion tokens for max_tokens 1: one is billed, and the pod is caught.
  Billed b = bill(answer(10, 200000, 1), 100, 1, 4096);
  EXPECT_EQ(b.completion_tokens, 1);
  EXPECT_EQ(b.fault, "the answer counts 200000 completion tokens and gives 1 ids");
  // Ids padded to match: capped by max_tokens, and a fault.
  b = bill(answer(10, 200000, 200000), 100, 1, 4096);
  EXPECT_EQ(b.completion_tokens, 1);
  EXPECT_EQ(b.fault, "200000 ids for a request of max_tokens 1");
  // Beyond the model's context.
  b = bill(answer(10, 5000, 5000), 100, 8192, 4096);
  EXPECT_EQ(b.completion_tokens, 4096);
  EXPECT_EQ(b.fault, "5000 ids beyond the model's context of 4096");
  // The prompt: no more than the request's bytes and a template's tokens, nor the context.
  b = bill(answer(1000000, 1, 1), 100, 8, 4096);
  EXPECT_EQ(b.prompt_tokens, 100 + kTemplateTokens);
  b = bill(answer(1000000, 1, 1), 100000, 8, 4096);
  EXPECT_EQ(b.prompt_tokens, 4096);
  b = bill(answer(-5, -5, 0), 100, 8, 4096);
  EXPECT_EQ(b.prompt_tokens, 0);
  EXPECT_EQ(b.completion_tokens, 0);
}

TEST(BillingTest, AnAnswerWithoutIdsIsNotBilledForItsTokensAndIsAFault) {
  const Billed b = bill(answer(10, 16, 0), 100, 16, 4096);
  EXPECT_EQ(b.completion_tokens, 0);
  EXPECT_EQ(b.fault, "the answer counts 16 completion tokens and gives no completion_token_ids");
}

}  // namespace
}  // namespace herd::hub
