#include "hub/answer_reader.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hub/billing.h"
#include "hub/checks.h"
#include "hub/credits.h"
#include "util/error.h"

namespace herd::hub {
namespace {

TEST(AnswerReaderTest, AWholeAnswerGivesUsageAndTokensAndLosesTheExtension) {
  AnswerFacts f;
  const std::string out = read_answer(
      R"({"choices":[{"finish_reason":"stop","message":{"content":"hi"}}],)"
      R"("herd":{"completion_token_ids":[5,6]},"usage":{"prompt_tokens":7,"completion_tokens":2}})",
      f);
  EXPECT_EQ(out.find("herd"), std::string::npos);
  EXPECT_NE(out.find(R"("content":"hi")"), std::string::npos);
  EXPECT_EQ(f.prompt_tokens, 7);
  EXPECT_EQ(f.completion_tokens, 2);
  EXPECT_EQ(f.token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(f.finished);
  EXPECT_EQ(f.text, "hi");
  AnswerFacts plain;
  read_answer(R"({"choices":[{"finish_reason":"stop","text":"once upon"}]})", plain);
  EXPECT_EQ(plain.text, "once upon");
  AnswerFacts g;
  EXPECT_EQ(read_answer("not json", g), "not json");
  EXPECT_FALSE(g.completion_tokens);
}

// Ids past the answer's most are counted, not kept: one past it shows the answer overran.
TEST(AnswerReaderTest, IdsPastTheMostAreCountedNotKept) {
  AnswerFacts whole;
  read_answer(R"({"choices":[],"herd":{"completion_token_ids":[1,2,3,4,5,6]}})", whole, 2);
  EXPECT_EQ(whole.token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(whole.ids_given, 6);
  StreamReader r(false, 2);
  for (int i = 0; i < 1000; ++i) {
    r.feed("data: {\"choices\":[],\"herd\":{\"completion_token_ids\":[7,8]}}\n\n");
  }
  EXPECT_EQ(r.facts().token_ids, (std::vector<int32_t>{7, 8, 7}));
  EXPECT_EQ(r.facts().ids_given, 2000);
  // Billed: the ids kept, and the fault names all those given.
  AnswerFacts f = r.facts();
  f.completion_tokens = 2000;
  const Billed b = bill(f, 100, 2, 0);
  EXPECT_EQ(b.completion_tokens, 2);
  EXPECT_EQ(b.fault, "2000 ids for a request of max_tokens 2");
}

TEST(AnswerReaderTest, AStreamSplitAnywhereGivesTheSameEventsWithoutTheHubsParts) {
  const std::string stream =
      "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"
      ": keep-alive\n\n"
      "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],"
      "\"herd\":{\"completion_token_ids\":[1,2,3]}}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  for (bool keep_usage : {false, true}) {
    for (size_t piece : {size_t{1}, size_t{7}, stream.size()}) {
      StreamReader r(keep_usage);
      std::string out;
      for (size_t i = 0; i < stream.size(); i += piece) out += r.feed(stream.substr(i, piece));
      out += r.flush();
      EXPECT_EQ(out.find("herd"), std::string::npos);
      EXPECT_EQ(out.find("usage") != std::string::npos, keep_usage);
      EXPECT_NE(out.find("data: [DONE]\n\n"), std::string::npos);
      EXPECT_NE(out.find(": keep-alive\n\n"), std::string::npos);
      EXPECT_EQ(r.facts().token_ids, (std::vector<int32_t>{1, 2, 3}));
      EXPECT_EQ(r.facts().completion_tokens, 3);
      EXPECT_EQ(r.facts().prompt_tokens, 4);
      EXPECT_TRUE(r.facts().finished);
      EXPECT_EQ(r.facts().text, "a");
    }
  }
}

TEST(ChecksTest, GreedyTokensMustBeNearTheBestAndSampledOnesLikelyEnough) {
  const CheckThresholds t{1e-6, 0.5f, -6};
  nlohmann::json greedy = {{"temperature", 0},
                           {"scores",
                            {{{"token", 1}, {"probability", 1.0}, {"gap", 0.0}},
                             {{"token", 2}, {"probability", 0.0}, {"gap", 0.3}}}}};
  Verdict v = judge(greedy, 2, t);
  EXPECT_TRUE(v.passed);
  EXPECT_EQ(v.tokens, 2);
  greedy["scores"][1]["gap"] = 3.5;
  v = judge(greedy, 2, t);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.implausible, 1);
  EXPECT_NE(v.detail.find("token 1 (id 2)"), std::string::npos) << v.detail;

  nlohmann::json sampled = {{"temperature", 0.7},
                            {"scores",
                             {{{"token", 9},
                               {"probability", 2e-6},
                               {"gap", 9.0},
                               {"entropy", 12.0},
                               {"variance", 4.0}}}}};
  EXPECT_TRUE(judge(sampled, 1, t).passed);
  sampled["scores"][0]["probability"] = 1e-9;
  EXPECT_FALSE(judge(sampled, 1, t).passed);

  // Together: 20 tokens each a little less likely than an honest draw pass; the same
  // tokens far less likely (another model's) sink z.
  nlohmann::json together = {{"temperature", 1.0}, {"scores", nlohmann::json::array()}};
  for (int i = 0; i < 20; ++i) {
    together["scores"].push_back(
        {{"token", i}, {"probability", 0.2}, {"gap", 1}, {"entropy", 1.5}, {"variance", 0.5}});
  }
  v = judge(together, 20, t);  // log 0.2 + 1.5 = -0.11 each: z = -2.2 / 3.2 = -0.69
  EXPECT_TRUE(v.passed) << v.detail;
  EXPECT_NEAR(v.z, 20 * (std::log(0.2) + 1.5) / std::sqrt(20 * 0.51), 1e-9);
  for (auto& s : together["scores"]) s["probability"] = 0.001;  // -5.4 each: z = -33
  v = judge(together, 20, t);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("less likely than honest draws"), std::string::npos) << v.detail;

  EXPECT_THROW(judge(sampled, 2, t), Error);  // not the served count
  EXPECT_THROW(judge(nlohmann::json::object(), 1, t), Error);
}

TEST(ChecksTest, NewPodsAreAlwaysCheckedThenSampled) {
  EXPECT_TRUE(should_check(0, 0.0, 0.99));
  EXPECT_TRUE(should_check(kAlwaysChecked - 1, 0.0, 0.99));
  EXPECT_FALSE(should_check(kAlwaysChecked, 0.1, 0.5));
  EXPECT_TRUE(should_check(kAlwaysChecked, 0.1, 0.05));
}

TEST(CreditsTest, ARequestsPriceSplitsBetweenThePodAndTheFee) {
  const Charge c = price_of(Prices{1, 4, 10}, 20, 7);
  EXPECT_EQ(c.client_pays, 20 + 28);
  EXPECT_EQ(c.pod_earns, 25);  // 28 x 0.9 = 25.2, rounded down
  EXPECT_EQ(c.fee, 23);
  const std::string secret(net::kKeySecretBytes, 's');
  EXPECT_EQ(Credits::client_account(secret, ""), "client:open");
  EXPECT_NE(Credits::client_account(secret, "k1"), Credits::client_account(secret, "k2"));
  EXPECT_EQ(Credits::client_account(secret, "k1").find("k1"), std::string::npos);  // hashed
}

}  // namespace
}  // namespace herd::hub
