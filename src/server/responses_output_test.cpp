// The Responses API's output: items in the order the reply made them, stream events that add
// up to those items, and the response object's shape.
#include "server/responses_output.h"

#include <gtest/gtest.h>

#include "server/responses_request.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

ParsedDelta content(std::string text) {
  ParsedDelta d;
  d.content = std::move(text);
  return d;
}

ParsedDelta reasoning(std::string text) {
  ParsedDelta d;
  d.reasoning = std::move(text);
  return d;
}

ParsedDelta call(int index, std::string id, std::string name, std::string arguments) {
  ParsedDelta d;
  d.tool_calls.push_back({std::move(id), std::move(name), std::move(arguments), index});
  return d;
}

std::vector<std::string> types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) out.push_back(e["type"].get<std::string>());
  return out;
}

TEST(ResponseOutput, ItemsInTheOrderTheyCame) {
  ResponseOutput out("x");
  std::vector<json> events;
  out.add(reasoning("Think"), events);
  out.add(reasoning("ing."), events);
  out.add(content("\n\n"), events);  // between items: no message of its own
  out.add(content("Hel"), events);
  out.add(content("lo"), events);
  out.add(call(0, "call_0", "f", "{\"a\""), events);
  out.add(call(0, "", "", ":1}"), events);
  out.add(call(1, "call_1", "g", ""), events);
  out.finish(false, events);
  const json expected = json::parse(R"([
      {"id": "rs_x_0", "type": "reasoning", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Thinking."}], "status": "completed"},
      {"id": "msg_x_1", "type": "message", "status": "completed", "role": "assistant",
       "content": [{"type": "output_text", "text": "Hello", "annotations": []}]},
      {"id": "fc_x_2", "type": "function_call", "status": "completed", "arguments": "{\"a\":1}",
       "call_id": "call_0", "name": "f"},
      {"id": "fc_x_3", "type": "function_call", "status": "completed", "arguments": "",
       "call_id": "call_1", "name": "g"}])");
  EXPECT_EQ(out.items(), expected) << out.items().dump(1);
  const std::vector<std::string> expected_types = {"response.output_item.added",
                                                   "response.content_part.added",
                                                   "response.reasoning_text.delta",
                                                   "response.reasoning_text.delta",
                                                   "response.reasoning_text.done",
                                                   "response.content_part.done",
                                                   "response.output_item.done",
                                                   "response.output_item.added",
                                                   "response.content_part.added",
                                                   "response.output_text.delta",
                                                   "response.output_text.delta",
                                                   "response.output_text.done",
                                                   "response.content_part.done",
                                                   "response.output_item.done",
                                                   "response.output_item.added",
                                                   "response.function_call_arguments.delta",
                                                   "response.function_call_arguments.delta",
                                                   "response.function_call_arguments.done",
                                                   "response.output_item.done",
                                                   "response.output_item.added",
                                                   "response.function_call_arguments.done",
                                                   "response.output_item.done"};
  EXPECT_EQ(types(events), expected_types);
  // Each item's done event carries the whole item, at its index; deltas add up to its text.
  std::string text;
  for (const json& e : events) {
    if (e["type"] == "response.output_text.delta") {
      EXPECT_EQ(e["output_index"], 1);
      EXPECT_EQ(e["item_id"], "msg_x_1");
      text += e["delta"].get<std::string>();
    }
    if (e["type"] == "response.output_item.done") {
      EXPECT_EQ(e["item"], expected[e["output_index"].get<size_t>()]);
    }
  }
  EXPECT_EQ(text, "Hello");
}

TEST(ResponseOutput, EmptyOrCutShortReplies) {
  // Nothing but whitespace: one (empty) message still.
  ResponseOutput empty("e");
  std::vector<json> events;
  empty.add(content("  "), events);
  empty.finish(false, events);
  ASSERT_EQ(empty.items().size(), 1u);
  EXPECT_EQ(empty.items()[0]["type"], "message");
  EXPECT_EQ(empty.items()[0]["content"][0]["text"], "  ");
  // Cut short inside the reasoning: that item is incomplete, and there is no message.
  ResponseOutput cut("c");
  events.clear();
  cut.add(reasoning("Hmm"), events);
  cut.finish(true, events);
  ASSERT_EQ(cut.items().size(), 1u);
  EXPECT_EQ(cut.items()[0]["status"], "incomplete");
  EXPECT_EQ(events.back()["type"], "response.output_item.done");
}

TEST(ResponseOutput, ResponseObjectEchoesTheRequest) {
  const ResponsesRequest r = parse_responses_request(R"({"input": "hi", "instructions": "I",
      "max_output_tokens": 5, "temperature": 0.3, "previous_response_id": "resp_p",
      "tools": [{"type": "function", "name": "f"}], "tool_choice": "none"})");
  engine::Finish finish;
  finish.reason = engine::FinishReason::kLength;
  finish.n_prompt = 10;
  finish.n_cached = 4;
  finish.n_completion = 5;
  const json o = response_object(r, "resp_1", 123, "model", json::array(), &finish);
  EXPECT_EQ(o["id"], "resp_1");
  EXPECT_EQ(o["object"], "response");
  EXPECT_EQ(o["created_at"], 123);
  EXPECT_EQ(o["status"], "incomplete");
  EXPECT_EQ(o["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_TRUE(o["error"].is_null());
  EXPECT_EQ(o["instructions"], "I");
  EXPECT_EQ(o["max_output_tokens"], 5);
  EXPECT_EQ(o["temperature"], 0.3);
  EXPECT_EQ(o["top_p"], 1.0);
  EXPECT_EQ(o["previous_response_id"], "resp_p");
  EXPECT_EQ(o["tool_choice"], "none");
  EXPECT_EQ(o["tools"][0]["name"], "f");
  EXPECT_EQ(o["text"]["format"]["type"], "text");
  EXPECT_EQ(o["usage"],
            json::parse(R"({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})"));
  finish.reason = engine::FinishReason::kStop;
  EXPECT_EQ(response_object(r, "resp_1", 1, "m", json::array(), &finish)["status"], "completed");
  EXPECT_TRUE(
      response_object(r, "resp_1", 1, "m", json::array(), &finish)["incomplete_details"].is_null());
  finish.reason = engine::FinishReason::kError;
  finish.error = "boom";
  const json failed = response_object(r, "resp_1", 1, "m", json::array(), &finish);
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"]["message"], "generation failed: boom");
  const json started = response_object(r, "resp_1", 1, "m", json::array(), nullptr);
  EXPECT_EQ(started["status"], "in_progress");
  EXPECT_TRUE(started["usage"].is_null());
}

TEST(ResponseOutput, EventsAreServerSentEventsWithTheirType) {
  EXPECT_EQ(
      responses_sse(json{{"type", "response.created"}, {"sequence_number", 0}}),
      "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n");
  // Invalid UTF-8 is replaced, never thrown on.
  const std::string sse = responses_sse(json{{"type", "t"}, {"delta", "\xff"}});
  EXPECT_NE(sse.find("\xEF\xBF\xBD"), std::string::npos);
}

}  // namespace
}  // namespace herd::server
