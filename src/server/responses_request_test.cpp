// The Responses API's request: its fields reach the chat request, its items become chat
// messages, and every client mistake is a 400 naming the field as the Responses API does.
#include "server/responses_request.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

// The param an invalid body is rejected for (fails the test when it is accepted).
std::string rejected_param(const std::string& body) {
  try {
    parse_responses_request(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    const auto param = e.to_json()["error"]["param"];
    return param.is_null() ? "" : param.get<std::string>();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "<accepted>";
}

std::string rejected_message(const std::string& body) {
  try {
    parse_responses_request(body);
  } catch (const ApiError& e) {
    return e.message();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

TEST(ResponsesRequest, FieldsReachTheChatRequest) {
  const ResponsesRequest r = parse_responses_request(R"({
      "model": "m", "input": "hi", "instructions": "Be brief.", "stream": true,
      "max_output_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 42, "stop": ["x"],
      "tools": [{"type": "function", "name": "f", "description": "d",
                 "parameters": {"type": "object"}, "strict": false}],
      "tool_choice": {"type": "function", "name": "f"},
      "text": {"format": {"type": "json_schema", "name": "s", "strict": true,
                          "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
      "reasoning": {"effort": "low"}, "store": false, "parallel_tool_calls": false,
      "metadata": {"k": "v"}, "user": "u", "include": [], "truncation": "disabled"})");
  EXPECT_EQ(r.chat.sampling.model, "m");
  EXPECT_TRUE(r.chat.sampling.stream);
  EXPECT_EQ(r.chat.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.chat.sampling.sampler.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.chat.sampling.sampler.top_p, 0.9f);
  EXPECT_EQ(r.chat.sampling.sampler.seed, 42u);
  EXPECT_EQ(r.chat.sampling.stop, std::vector<std::string>{"x"});
  ASSERT_TRUE(r.chat.tools.is_array());
  EXPECT_EQ(r.chat.tools[0]["type"], "function");
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "f");
  EXPECT_EQ(r.chat.tools[0]["function"]["description"], "d");
  EXPECT_EQ(r.chat.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(r.chat.tool_choice.kind, ToolChoice::Kind::kFunction);
  EXPECT_EQ(r.chat.tool_choice.function, "f");
  EXPECT_EQ(r.chat.response_format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_TRUE(r.chat.response_format.grammar);
  EXPECT_EQ(r.chat.template_kwargs["reasoning_effort"], "low");
  EXPECT_FALSE(r.store);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.instructions, "Be brief.");
  EXPECT_EQ(r.tools[0]["strict"], false);
  EXPECT_EQ(r.max_output_tokens, 7);
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.metadata["k"], "v");
  EXPECT_EQ(r.user, "u");
  ASSERT_EQ(r.input.size(), 1u);
  EXPECT_EQ(r.input[0]["role"], "user");
  EXPECT_EQ(r.input[0]["content"], "hi");
}

TEST(ResponsesRequest, DefaultsAreOpenAIs) {
  const ResponsesRequest r = parse_responses_request(R"({"input": "hi"})");
  EXPECT_FALSE(r.chat.sampling.stream);
  EXPECT_EQ(r.chat.sampling.max_tokens, -1);
  EXPECT_TRUE(r.chat.tools.is_null());
  EXPECT_EQ(r.chat.tool_choice.kind, ToolChoice::Kind::kAuto);
  EXPECT_EQ(r.chat.response_format.kind, ResponseFormat::Kind::kText);
  EXPECT_TRUE(r.store);
  EXPECT_TRUE(r.instructions.is_null());
  EXPECT_TRUE(r.max_output_tokens.is_null());
  EXPECT_EQ(r.text_format, json({{"type", "text"}}));
  EXPECT_EQ(r.tool_choice, "auto");
  // json_object holds the reply to an object.
  const ResponsesRequest o =
      parse_responses_request(R"({"input": "hi", "text": {"format": {"type": "json_object"}}})");
  EXPECT_EQ(o.chat.response_format.kind, ResponseFormat::Kind::kJsonObject);
}

TEST(ResponsesRequest, MistakesNameTheirField) {
  EXPECT_EQ(rejected_param("[1]"), "");
  EXPECT_EQ(rejected_param("{"), "");
  EXPECT_EQ(rejected_param("{}"), "input");
  EXPECT_EQ(rejected_param(R"({"input": 3})"), "input");
  EXPECT_EQ(rejected_param(R"({"input": [3]})"), "input[0]");
  EXPECT_EQ(rejected_param(R"({"input": [{"content": "x"}]})"), "input[0]");
  EXPECT_EQ(rejected_param(R"({"input": [{"role": "tool", "content": "x"}]})"), "input[0].role");
  EXPECT_EQ(rejected_param(R"({"input": [{"role": "user"}]})"), "input[0].content");
  EXPECT_EQ(rejected_param(R"({"input": [{"role": "user", "content": 5}]})"), "input[0].content");
  EXPECT_EQ(
      rejected_param(
          R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})"),
      "input[0].content[0].type");
  EXPECT_EQ(rejected_param(R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})"),
            "input[0].content[0].text");
  EXPECT_EQ(
      rejected_param(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"),
      "input[0].call_id");
  EXPECT_EQ(rejected_param(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})"),
            "input[0].output");
  EXPECT_EQ(rejected_param(R"({"input": [{"type": "item_reference", "id": "x"}]})"),
            "input[0].type");
  EXPECT_EQ(rejected_param(R"({"input": [{"type": "web_search_call", "id": "x"}]})"),
            "input[0].type");
  EXPECT_EQ(rejected_param(R"({"input": [{"type": "reasoning", "summary": [{}]}]})"),
            "input[0].summary[0].text");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "max_output_tokens": 0})"), "max_output_tokens");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "max_output_tokens": 1e300})"), "max_output_tokens");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "max_output_tokens": 18446744073709551615})"),
            "max_output_tokens");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "temperature": 3})"), "temperature");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "top_p": "x"})"), "top_p");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "model": 1})"), "model");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "instructions": 1})"), "instructions");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "tools": {}})"), "tools");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "tools": [{"type": "function"}]})"), "tools[0].name");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "tools": [{"type": "web_search_preview"}]})"),
            "tools[0].type");
  EXPECT_NE(rejected_message(R"({"input": "hi", "tools": [{"type": "file_search"}]})")
                .find("'file_search'"),
            std::string::npos);
  EXPECT_EQ(
      rejected_param(
          R"({"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": 1}]})"),
      "tools[0].parameters");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "tool_choice": {"type": "file_search"}})"),
            "tool_choice");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "tools": [{"type": "function", "name": "f"}],
                               "tool_choice": {"type": "function", "name": "g"}})"),
            "tool_choice.name");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "text": 1})"), "text");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "text": {"format": {"type": "xml"}}})"),
            "text.format.type");
  EXPECT_EQ(rejected_param(
                R"({"input": "hi", "text": {"format": {"type": "json_schema", "schema": {}}}})"),
            "text.format.name");
  EXPECT_EQ(rejected_param(
                R"({"input": "hi", "text": {"format": {"type": "json_schema", "name": "n", "schema":
                    {"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}}}}})"),
            "text.format.schema.properties.a.pattern");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "reasoning": {"effort": 1}})"), "reasoning.effort");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "store": "yes"})"), "store");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "metadata": {"k": 1}})"), "metadata.k");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "previous_response_id": 5})"),
            "previous_response_id");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "background": true})"), "background");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "conversation": "c"})"), "conversation");
  EXPECT_EQ(rejected_param(R"({"input": "hi", "truncation": "middle"})"), "truncation");
  // Nesting deeper than the server takes is refused before it is built.
  EXPECT_EQ(rejected_param(R"({"input": )" + std::string(100, '[') + std::string(100, ']') + "}"),
            "");
}

TEST(ResponsesRequest, PreviousResponseAloneIsEnough) {
  const ResponsesRequest r = parse_responses_request(R"({"previous_response_id": "resp_1"})");
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_TRUE(r.input.empty());
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  const ResponsesRequest r = parse_responses_request(R"({"input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                      {"type": "input_text", "text": "in Oslo?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Ask the tool."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
      {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
      {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "3 C"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
      {"type": "function_call", "call_id": "c3", "name": "weather", "arguments": "{}"}]})");
  const json messages = responses_messages("Be brief.", r.input);
  const json expected = json::parse(R"([
      {"role": "system", "content": "Be brief.\n\nUse tools."},
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": "Let me look.", "reasoning_content": "Ask the tool.",
       "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
         {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "3 C", "name": "weather"},
      {"role": "tool", "tool_call_id": "c2", "content": "noon", "name": "time"},
      {"role": "assistant", "content": "",
       "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}])");
  EXPECT_EQ(messages, expected) << messages.dump(1);
  // No instructions: no system message of them.
  EXPECT_EQ(responses_messages(nullptr, json::parse(R"([{"role": "user", "content": "hi"}])")),
            json::parse(R"([{"role": "user", "content": "hi"}])"));
}

}  // namespace
}  // namespace herd::server
