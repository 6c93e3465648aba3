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

// ---- the other APIs' answers (answer_reader.h's table) ----

// One API's answer as a pod sends it: whole, and streamed.
struct ApiAnswer {
  AnswerFormat format;
  std::string whole, stream;
};

// The same answer ("hi there", 7 prompt tokens, 2 ids) in each of the other APIs.
std::vector<ApiAnswer> api_answers() {
  return {
      {AnswerFormat::kAnthropic,
       R"({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"thinking",)"
       R"("thinking":"hmm"},{"type":"text","text":"hi there"}],"stop_reason":"end_turn",)"
       R"("usage":{"input_tokens":7,"output_tokens":2},"herd":{"completion_token_ids":[5,6]}})",
       "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"type\":"
       "\"message\",\"content\":[],\"usage\":{\"input_tokens\":7,\"output_tokens\":0}}}\n\n"
       "event: ping\ndata: {\"type\": \"ping\"}\n\n"
       "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
       "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
       "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
       "\"delta\":{\"type\":\"text_delta\",\"text\":\"hi \"}}\n\n"
       "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
       "\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n"
       "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
       "\"end_turn\"},\"usage\":{\"output_tokens\":2},\"herd\":{\"completion_token_ids\":[5,6]}}"
       "\n\n"
       "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
      {AnswerFormat::kResponses,
       R"({"id":"resp_1","object":"response","status":"completed","output":[{"type":"reasoning",)"
       R"("summary":[{"type":"summary_text","text":"hmm"}]},{"type":"message","content":[{"type":"output_text","text":"hi there"}]}],)"
       R"("usage":{"input_tokens":7,"output_tokens":2},"herd":{"completion_token_ids":[5,6]}})",
       "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,"
       "\"response\":{\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
       "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
       "\"sequence_number\":1,\"delta\":\"hi \"}\n\n"
       ": keep-alive\n\n"
       "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
       "\"sequence_number\":2,\"delta\":\"there\"}\n\n"
       "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,"
       "\"response\":{\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"type\":"
       "\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"hi there\"}]}],\"usage\":"
       "{\"input_tokens\":7,\"output_tokens\":2},\"herd\":{\"completion_token_ids\":[5,6]}}}\n\n"},
      {AnswerFormat::kOllama,
       R"({"model":"m","message":{"role":"assistant","content":"hi there","thinking":"hmm"},)"
       R"("done":true,"done_reason":"stop","prompt_eval_count":7,"eval_count":2,)"
       R"("herd":{"completion_token_ids":[5,6]}})",
       "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":"
       "\"hmm\"},\"done\":false}\n"
       "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"hi \"},\"done\":false}\n"
       "{\"model\":\"m\",\"response\":\"there\",\"done\":false}\n"
       "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,"
       "\"done_reason\":\"stop\",\"prompt_eval_count\":7,\"eval_count\":2,\"herd\":"
       "{\"completion_token_ids\":[5,6]}}\n"},
  };
}

void expect_facts(const AnswerFacts& f, const std::string& what) {
  EXPECT_EQ(f.prompt_tokens, 7) << what;
  EXPECT_EQ(f.completion_tokens, 2) << what;
  EXPECT_EQ(f.token_ids, (std::vector<int32_t>{5, 6})) << what;
  EXPECT_EQ(f.ids_given, 2) << what;
  EXPECT_TRUE(f.finished) << what;
  EXPECT_EQ(f.text, "hi there") << what;
}

std::string read_stream(AnswerFormat format, const std::string& bytes, size_t cut,
                        AnswerFacts& facts, size_t max_ids = kMaxTokenIds) {
  StreamReader r(true, max_ids, format);
  std::string out = r.feed(bytes.substr(0, cut));
  out += r.feed(bytes.substr(cut));
  out += r.flush();
  facts = r.facts();
  return out;
}

TEST(AnswerReaderTest, EachApisWholeAnswerGivesItsUsageIdsAndText) {
  for (const ApiAnswer& a : api_answers()) {
    const std::string what = "format " + std::to_string(static_cast<int>(a.format));
    AnswerFacts f;
    const std::string out = read_answer(a.whole, f, kMaxTokenIds, a.format);
    EXPECT_EQ(out.find("herd"), std::string::npos) << what;
    EXPECT_NE(out.find("hi there"), std::string::npos) << what;
    EXPECT_NE(out.find("hmm"), std::string::npos) << what;  // reasoning is passed on, not read
    expect_facts(f, what);
  }
}

// Every cut of the stream gives the client the same bytes and the hub the same facts, and
// herd's extension never reaches the client.
TEST(AnswerReaderTest, EachApisStreamSplitAtEveryByteGivesTheSameEventsAndFacts) {
  for (const ApiAnswer& a : api_answers()) {
    AnswerFacts once;
    const std::string whole = read_stream(a.format, a.stream, a.stream.size(), once);
    const std::string what = "format " + std::to_string(static_cast<int>(a.format));
    expect_facts(once, what);
    EXPECT_EQ(whole.find("herd"), std::string::npos) << what;
    EXPECT_NE(whole.find("hi "), std::string::npos) << what;
    for (size_t cut = 0; cut <= a.stream.size(); ++cut) {
      AnswerFacts f;
      ASSERT_EQ(read_stream(a.format, a.stream, cut, f), whole) << what << " cut " << cut;
      expect_facts(f, what + " cut " + std::to_string(cut));
    }
    // Byte by byte.
    StreamReader r(true, kMaxTokenIds, a.format);
    std::string out;
    for (char c : a.stream) out += r.feed(std::string_view(&c, 1));
    out += r.flush();
    EXPECT_EQ(out, whole) << what;
  }
  // Events other than the one carrying herd's extension pass as they came, byte for byte.
  AnswerFacts f;
  const std::string ollama = api_answers()[2].stream;
  const std::string out = read_stream(AnswerFormat::kOllama, ollama, 0, f);
  const size_t last_line = ollama.rfind('\n', ollama.size() - 2) + 1;
  EXPECT_EQ(out.substr(0, last_line), ollama.substr(0, last_line));
}

TEST(AnswerReaderTest, HostileAnswersOfEachApiAreReadWithinBounds) {
  for (const ApiAnswer& a : api_answers()) {
    const std::string what = "format " + std::to_string(static_cast<int>(a.format));
    // Ids past the bound: one more kept, all counted.
    AnswerFacts f;
    read_answer(a.whole, f, 1, a.format);
    EXPECT_EQ(f.token_ids, (std::vector<int32_t>{5, 6})) << what;
    read_answer(a.whole, f, 0, a.format);
    EXPECT_EQ(f.ids_given, 4) << what;
    // Malformed and hostile bytes: passed on as they came, nothing read.
    for (const std::string& bad :
         {std::string("{\"type\":\"message\",\"usage\":{\"input_tokens\":\"7\"}"),
          std::string(100000, '['), std::string("\n\n\n"), std::string("event: x\n\n"),
          std::string("data: {\"herd\":5}"),
          std::string("{\"herd\":{\"completion_token_ids\":"
                      "[1,\"x\",2]},\"done\":\"yes\"}\n")}) {
      AnswerFacts g;
      read_answer(bad, g, kMaxTokenIds, a.format);
      EXPECT_FALSE(g.completion_tokens) << what;
      EXPECT_FALSE(g.prompt_tokens) << what;
      StreamReader r(true, kMaxTokenIds, a.format);
      const std::string out = r.feed(bad) + r.flush();
      EXPECT_FALSE(r.facts().finished) << what;
      EXPECT_LE(r.facts().token_ids.size(), 1u) << what;  // an id before a non-id is kept
    }
  }
  // A huge text is kept up to the reader's bound (8 MiB), not all of it.
  const std::string big(size_t{3} << 20, 'x');
  StreamReader r(true, kMaxTokenIds, AnswerFormat::kOllama);
  for (int i = 0; i < 4; ++i) r.feed("{\"response\":\"" + big + "\",\"done\":false}\n");
  EXPECT_EQ(r.facts().text.size(), size_t{8} << 20);
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
