// Anthropic Messages responses: the whole message's blocks, the streamed events' block
// indices across thinking, text and tool calls, stop reasons and the error shape.
#include "server/anthropic_response.h"

#include <gtest/gtest.h>

#include <sstream>

#include "http/anthropic_errors.h"
#include "server/response.h"

namespace herd::server {
namespace {

using json = nlohmann::json;

// The events of a stream's text: [{"event": type, "data": json}].
std::vector<std::pair<std::string, json>> events(const std::string& text) {
  std::vector<std::pair<std::string, json>> out;
  std::istringstream in(text);
  std::string line, event;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) event = line.substr(7);
    if (line.rfind("data: ", 0) == 0) {
      json data = json::parse(line.substr(6));
      EXPECT_EQ(data["type"], event) << line;
      out.emplace_back(event, std::move(data));
    }
  }
  return out;
}

ParsedDelta text(const std::string& t) {
  ParsedDelta d;
  d.content = t;
  return d;
}

TEST(AnthropicResponse, ErrorShapeAndTypes) {
  const json e = anthropic_error(ApiError(404, "no model"));
  EXPECT_EQ(e, json::parse(R"({"type": "error", "error": {"type": "not_found_error",
                                                          "message": "no model"}})"));
  EXPECT_EQ(http::anthropic_error_type(400), "invalid_request_error");
  EXPECT_EQ(http::anthropic_error_type(401), "authentication_error");
  EXPECT_EQ(http::anthropic_error_type(503), "overloaded_error");
  EXPECT_EQ(http::anthropic_error_type(500), "api_error");
  EXPECT_EQ(http::anthropic_error_type(402), "billing_error");
  EXPECT_EQ(http::anthropic_error_type(422), "invalid_request_error");
  EXPECT_EQ(anthropic_event({{"type", "ping"}}), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
}

TEST(AnthropicResponse, StopSequenceIsTheEarliestFound) {
  EXPECT_EQ(matched_stop("Hello world. Bye", {"Bye", "o w"}), "o w");
  EXPECT_EQ(matched_stop("Hello", {"x"}), std::nullopt);
  EXPECT_EQ(matched_stop("Hello", {}), std::nullopt);
  engine::Finish f;
  EXPECT_EQ(anthropic_stop_reason(f, false, std::nullopt), "end_turn");
  EXPECT_EQ(anthropic_stop_reason(f, false, "x"), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason(f, true, std::nullopt), "tool_use");
  f.reason = engine::FinishReason::kLength;
  EXPECT_EQ(anthropic_stop_reason(f, false, std::nullopt), "max_tokens");
}

TEST(AnthropicResponse, WholeMessageBlocks) {
  ParsedDelta reply;
  reply.reasoning = "hmm";
  reply.content = "Checking.";
  reply.tool_calls.push_back({"toolu_1_0", "weather", R"({"city":"Oslo"})", 0});
  reply.tool_calls.push_back({"toolu_1_1", "time", "not json", 1});
  engine::Finish f;
  f.n_prompt = 12;
  f.n_completion = 7;
  const json m = anthropic_message({"msg_1", "m", 12}, reply, f, std::nullopt);
  EXPECT_EQ(m, json::parse(R"({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
    "content": [
      {"type": "thinking", "thinking": "hmm", "signature": ""},
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_1_0", "name": "weather", "input": {"city": "Oslo"}},
      {"type": "tool_use", "id": "toolu_1_1", "name": "time", "input": "not json"}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 12, "output_tokens": 7}})"));
  const json plain = anthropic_message({"msg_2", "m", 1}, text("Hi"), f, "END");
  EXPECT_EQ(plain["stop_reason"], "stop_sequence");
  EXPECT_EQ(plain["stop_sequence"], "END");
  EXPECT_EQ(anthropic_message({"msg_3", "m", 1}, {}, f, std::nullopt)["content"], json::array());
}

TEST(AnthropicResponse, StreamedBlocksHaveTheirOwnIndices) {
  AnthropicEvents ev({"msg_1", "m", 9});
  std::string out = ev.start();
  ParsedDelta think;
  think.reasoning = "a";
  out += ev.push(think);
  out += ev.push(think);
  ParsedDelta both;  // the end of the reasoning and the start of the text in one piece
  both.reasoning = "b";
  both.content = "Hi";
  out += ev.push(both);
  out += ev.push(text(" there"));
  ParsedDelta call;
  call.tool_calls.push_back({"toolu_1_0", "f", "", 0});
  out += ev.push(call);
  call.tool_calls = {{"", "", "{\"x\":", 0}, {"", "", "1}", 0}, {"toolu_1_1", "g", "{}", 1}};
  out += ev.push(call);
  out += ev.push({});
  engine::Finish f;
  f.n_completion = 5;
  out += ev.finish(f, std::nullopt);
  EXPECT_TRUE(ev.has_tool_calls());

  const auto e = events(out);
  std::vector<std::string> summary;
  for (const auto& [type, data] : e) {
    std::string s = type;
    if (data.contains("index")) s += " " + std::to_string(data["index"].get<int>());
    if (type == "content_block_start") s += " " + data["content_block"]["type"].get<std::string>();
    if (type == "content_block_delta") {
      const json& d = data["delta"];
      s += " " + d["type"].get<std::string>() + " " +
           (d.contains("text")       ? d["text"].get<std::string>()
            : d.contains("thinking") ? d["thinking"].get<std::string>()
                                     : d["partial_json"].get<std::string>());
    }
    summary.push_back(s);
  }
  const std::vector<std::string> expected = {
      "message_start",
      "ping",
      "content_block_start 0 thinking",
      "content_block_delta 0 thinking_delta a",
      "content_block_delta 0 thinking_delta a",
      "content_block_delta 0 thinking_delta b",
      "content_block_stop 0",
      "content_block_start 1 text",
      "content_block_delta 1 text_delta Hi",
      "content_block_delta 1 text_delta  there",
      "content_block_stop 1",
      "content_block_start 2 tool_use",
      "content_block_delta 2 input_json_delta {\"x\":",
      "content_block_delta 2 input_json_delta 1}",
      "content_block_stop 2",
      "content_block_start 3 tool_use",
      "content_block_delta 3 input_json_delta {}",
      "content_block_stop 3",
      "message_delta",
      "message_stop",
  };
  EXPECT_EQ(summary, expected);
  const json& start = e[0].second["message"];
  EXPECT_EQ(start["id"], "msg_1");
  EXPECT_EQ(start["usage"]["input_tokens"], 9);
  EXPECT_EQ(start["content"], json::array());
  EXPECT_EQ(e[11].second["content_block"],
            json::parse(R"({"type": "tool_use", "id": "toolu_1_0", "name": "f", "input": {}})"));
  const json& delta = e[e.size() - 2].second;
  EXPECT_EQ(delta["delta"]["stop_reason"], "tool_use");
  EXPECT_TRUE(delta["delta"]["stop_sequence"].is_null());
  EXPECT_EQ(delta["usage"]["output_tokens"], 5);
}

TEST(AnthropicResponse, AnEmptyStreamHasNoBlocks) {
  AnthropicEvents ev({"msg_1", "m", 1});
  engine::Finish f;
  f.reason = engine::FinishReason::kLength;
  const auto e = events(ev.start() + ev.finish(f, std::nullopt));
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[2].first, "message_delta");
  EXPECT_EQ(e[2].second["delta"]["stop_reason"], "max_tokens");
}

// herd's extension for a hub rides on message_delta, and only when asked.
TEST(AnthropicResponse, MessageDeltaCarriesTheTokenIdsWhenAsked) {
  engine::Finish f;
  f.n_completion = 2;
  AnthropicEvents asked({"msg_1", "m", 1});
  auto e = events(asked.finish(f, std::nullopt, herd_extension({5, 6})));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].second["herd"]["completion_token_ids"], json({5, 6}));
  EXPECT_EQ(e[0].second["usage"]["output_tokens"], 2);
  AnthropicEvents plain({"msg_1", "m", 1});
  e = events(plain.finish(f, std::nullopt));
  EXPECT_FALSE(e[0].second.contains("herd"));
}

}  // namespace
}  // namespace herd::server
