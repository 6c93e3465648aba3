// Response JSON and SSE framing.
#include "server/response.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

TEST(Response, SseEventIsOneDataLineAndABlankLine) {
  const std::string e = sse_event({{"a", "x\ny"}});
  EXPECT_EQ(e, "data: {\"a\":\"x\\ny\"}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Response, InvalidUtf8IsReplacedNotThrown) {
  const std::string bad = std::string("ok") + static_cast<char>(0xC3);
  std::string e;
  EXPECT_NO_THROW(e = sse_event({{"t", bad}}));
  EXPECT_NE(e.find("ok\xEF\xBF\xBD"), std::string::npos);
}

TEST(Response, ToolCallsMakeTheFinishReasonAndNullContent) {
  ParsedDelta m;
  m.tool_calls.push_back({"call_1", "f", "{\"a\":1}"});
  engine::Finish f;
  f.n_prompt = 10;
  f.n_completion = 4;
  f.n_cached = 3;
  const auto j = chat_completion({"chatcmpl-1", 5, "m"}, m, f, nullptr);
  const auto& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["usage"]["total_tokens"], 14);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
}

TEST(Response, FinishReasons) {
  engine::Finish f;
  f.reason = engine::FinishReason::kLength;
  EXPECT_EQ(openai_finish_reason(f, false), "length");
  f.reason = engine::FinishReason::kStop;
  EXPECT_EQ(openai_finish_reason(f, false), "stop");
  EXPECT_EQ(openai_finish_reason(f, true), "tool_calls");
}

TEST(Response, StreamedToolCallDeltaIsIndexed) {
  ParsedDelta d;
  d.content = "x";
  d.reasoning = "r";
  d.tool_calls.push_back({"call_2", "g", "{\"a\"", 2});
  d.tool_calls.push_back({"", "", ":1}", 2});
  const auto delta = chat_delta(d);
  EXPECT_EQ(delta["content"], "x");
  EXPECT_EQ(delta["reasoning_content"], "r");
  // The first piece names the call; the next only adds arguments, as OpenAI streams them.
  ASSERT_EQ(delta["tool_calls"].size(), 2u);
  EXPECT_EQ(delta["tool_calls"][0]["index"], 2);
  EXPECT_EQ(delta["tool_calls"][0]["id"], "call_2");
  EXPECT_EQ(delta["tool_calls"][0]["function"]["name"], "g");
  EXPECT_EQ(delta["tool_calls"][0]["function"]["arguments"], "{\"a\"");
  EXPECT_EQ(delta["tool_calls"][1]["index"], 2);
  EXPECT_FALSE(delta["tool_calls"][1].contains("id"));
  EXPECT_FALSE(delta["tool_calls"][1]["function"].contains("name"));
  EXPECT_EQ(delta["tool_calls"][1]["function"]["arguments"], ":1}");
  const auto chunk = chat_chunk({"id", 1, "m"}, delta, nullptr, nullptr);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
}

TEST(Response, InvalidUtf8KeysAreReplacedToo) {
  nlohmann::json j = nlohmann::json::object();
  j[std::string("a") + static_cast<char>(0xFF)] = 1;
  EXPECT_EQ(json_text(j), "{\"a\xEF\xBF\xBD\":1}");
}

}  // namespace
}  // namespace herd::server
