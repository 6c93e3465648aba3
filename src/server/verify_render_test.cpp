#include "server/verify_render.h"

#include <gtest/gtest.h>

#include "server/tiny_vocabulary_test_util.h"

namespace herd::server {
namespace {

TEST(VerifyRenderTest, IdsNoHonestPodServesAreUnscorable) {
  const std::vector<int32_t> ids = {5, 6, 7, 8};
  ServedIds s{&ids, 100, 8, 10, 64};
  EXPECT_EQ(unscorable(s), "");
  s.max_tokens = 3;
  EXPECT_EQ(unscorable(s), "4 ids for a request of max_tokens 3");
  s.max_tokens = -1;
  s.n_prompt = 62;
  EXPECT_EQ(unscorable(s), "4 ids after a prompt of 62 tokens: beyond the context of 64");
  const std::vector<int32_t> invented = {5, 100};
  s = ServedIds{&invented, 100, -1, 1, 64};
  EXPECT_EQ(unscorable(s), "id 100 (token 1) is not of this model's vocabulary [0, 100)");
}

TEST(VerifyRenderTest, TheTextIsTheIdsDecodedCutAtAStopAndParsed) {
  const tokenizer::Tokenizer& tok = tiny_vocabulary();
  const std::vector<int32_t> ids = tok.encode("The herd grazes. END and more", false, false);
  EXPECT_EQ(rendered_text(tok, false, {}, std::nullopt, ids), "The herd grazes. END and more");
  EXPECT_EQ(rendered_text(tok, false, {" END"}, std::nullopt, ids), "The herd grazes.");
  OutputParserOptions reasoning;
  reasoning.reasoning = true;
  const std::vector<int32_t> thought = tok.encode("<think>hmm</think>Grass.", false, false);
  EXPECT_EQ(rendered_text(tok, false, {}, reasoning, thought), "Grass.");
}

}  // namespace
}  // namespace herd::server
