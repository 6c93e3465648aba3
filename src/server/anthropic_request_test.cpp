// Anthropic Messages request parsing: content blocks become the OpenAI-shaped messages the
// templates render; every client mistake is a 400 naming the field.
#include "server/anthropic_request.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

using ojson = nlohmann::ordered_json;

AnthropicRequest parse(const std::string& body,
                       AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  return parse_anthropic_request(body, endpoint);
}

// The field an invalid body is rejected for (fails the test when it is accepted).
std::string rejected_param(const std::string& body,
                           AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  try {
    parse(body, endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    const auto param = e.to_json()["error"]["param"];
    return param.is_null() ? "" : param.get<std::string>();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "<accepted>";
}

const std::string kHead = R"("model": "m", "max_tokens": 16, )";
const std::string kHello = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(AnthropicRequest, FieldsReachTheSampler) {
  const AnthropicRequest a = parse("{" + kHead + kHello + R"(, "stream": true,
      "temperature": 0.5, "top_p": 0.9, "top_k": 12, "stop_sequences": ["a", "bc"],
      "metadata": {"user_id": "u"}, "thinking": {"type": "enabled", "budget_tokens": 2048}})");
  const SamplingRequest& s = a.chat.sampling;
  EXPECT_EQ(s.model, "m");
  EXPECT_EQ(s.max_tokens, 16);
  EXPECT_TRUE(s.stream);
  EXPECT_FLOAT_EQ(s.sampler.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.sampler.top_p, 0.9f);
  EXPECT_EQ(s.sampler.top_k, 12);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(a.thinking, true);
  EXPECT_TRUE(a.prefill.empty());
  EXPECT_EQ(parse("{" + kHead + kHello + R"(, "thinking": {"type": "disabled"}})").thinking, false);
  EXPECT_FALSE(parse("{" + kHead + kHello + "}").thinking.has_value());
}

TEST(AnthropicRequest, BlocksBecomeOpenAiMessages) {
  const AnthropicRequest a = parse("{" + kHead + R"(
      "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
      "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather "},
                                     {"type": "text", "text": "in Oslo?", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "Look it up.", "signature": "sig"},
          {"type": "text", "text": "Checking."},
          {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 C"},
          {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
           "content": [{"type": "text", "text": "no such city"}]},
          {"type": "text", "text": "Thanks."}]}]})");
  const ojson expected = ojson::parse(R"([
    {"role": "system", "content": "Be brief.\nBe kind."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Look it up.",
     "tool_calls": [{"id": "toolu_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "3 C"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such city"},
    {"role": "user", "content": "Thanks."}])");
  EXPECT_EQ(a.chat.messages, expected);
}

TEST(AnthropicRequest, ToolsAndToolChoice) {
  const std::string tools = R"("tools": [
      {"name": "weather", "description": "Weather of a city",
       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
      {"type": "custom", "name": "time", "input_schema": {"type": "object"}}])";
  AnthropicRequest a = parse("{" + kHead + kHello + ", " + tools + "}");
  ASSERT_EQ(a.chat.tools.size(), 2u);
  EXPECT_EQ(a.chat.tools[0]["type"], "function");
  EXPECT_EQ(a.chat.tools[0]["function"]["name"], "weather");
  EXPECT_EQ(a.chat.tools[0]["function"]["description"], "Weather of a city");
  EXPECT_EQ(a.chat.tools[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(a.chat.tool_choice.kind, ToolChoice::Kind::kAuto);
  using Kind = ToolChoice::Kind;
  const std::pair<const char*, Kind> choices[] = {
      {R"({"type": "auto"})", Kind::kAuto},
      {R"({"type": "none"})", Kind::kNone},
      {R"({"type": "any"})", Kind::kRequired},
      {R"({"type": "tool", "name": "time"})", Kind::kFunction}};
  for (const auto& [choice, kind] : choices) {
    a = parse("{" + kHead + kHello + ", " + tools + R"(, "tool_choice": )" + choice + "}");
    EXPECT_EQ(a.chat.tool_choice.kind, kind) << choice;
  }
  EXPECT_EQ(a.chat.tool_choice.function, "time");
  EXPECT_EQ(rejected_param("{" + kHead + kHello + ", " + tools +
                           R"(, "tool_choice": {"type": "tool", "name": "nope"}})"),
            "tool_choice.name");
  EXPECT_EQ(rejected_param("{" + kHead + kHello + R"(, "tool_choice": {"type": "any"}})"),
            "tool_choice");
  EXPECT_EQ(rejected_param("{" + kHead + kHello + ", " + tools +
                           R"(, "tool_choice": {"type": "required"}})"),
            "tool_choice.type");
  EXPECT_EQ(
      rejected_param("{" + kHead + kHello +
                     R"(, "tools": [{"type": "web_search_20250305", "name": "web_search"}]})"),
      "tools[0].type");
  EXPECT_EQ(rejected_param("{" + kHead + kHello + R"(, "tools": [{"name": "f"}]})"),
            "tools[0].input_schema");
}

TEST(AnthropicRequest, OutputFormatIsAJsonGrammar) {
  const AnthropicRequest a = parse("{" + kHead + kHello + R"(, "output_config": {"format":
      {"type": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
  EXPECT_EQ(a.chat.response_format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_NE(a.chat.response_format.grammar, nullptr);
  EXPECT_EQ(rejected_param("{" + kHead + kHello + R"(, "output_config": {"format":
      {"type": "json_schema", "schema": {"type": "string", "pattern": "a+"}}}})"),
            "output_config.format.schema.pattern");
  EXPECT_EQ(
      rejected_param("{" + kHead + kHello + R"(, "output_config": {"format": {"type": "xml"}}})"),
      "output_config.format");
}

TEST(AnthropicRequest, AFinalAssistantMessageIsAPrefill) {
  const AnthropicRequest a = parse("{" + kHead + R"("messages": [
      {"role": "user", "content": "Count"},
      {"role": "assistant", "content": [{"type": "text", "text": "1, 2,"}]}]})");
  EXPECT_EQ(a.prefill, "1, 2,");
  ASSERT_EQ(a.chat.messages.size(), 1u);
  EXPECT_EQ(a.chat.messages[0]["role"], "user");
  EXPECT_EQ(rejected_param("{" + kHead + R"("messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]})"),
            "messages");
}

TEST(AnthropicRequest, MaxTokensIsRequiredForMessagesOnly) {
  EXPECT_EQ(rejected_param(R"({"model": "m", )" + kHello + "}"), "max_tokens");
  const AnthropicRequest a =
      parse(R"({"model": "m", )" + kHello + "}", AnthropicEndpoint::kCountTokens);
  EXPECT_EQ(a.chat.messages.size(), 1u);
}

TEST(AnthropicRequest, MistakesAre400sNamingTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {"not json", ""},
      {"[1]", ""},
      {R"({"max_tokens": 5, )" + kHello + "}", "model"},
      {R"({"model": 3, "max_tokens": 5, )" + kHello + "}", "model"},
      {R"({"model": "m", "max_tokens": "5", )" + kHello + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 0, )" + kHello + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 99999999999999999999, )" + kHello + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": -3, )" + kHello + "}", "max_tokens"},
      {"{" + kHead + kHello + R"(, "temperature": 1.5})", "temperature"},
      {"{" + kHead + kHello + R"(, "temperature": "hot"})", "temperature"},
      {"{" + kHead + kHello + R"(, "top_k": -1})", "top_k"},
      {"{" + kHead + kHello + R"(, "stream": "yes"})", "stream"},
      {"{" + kHead + kHello + R"(, "stop_sequences": "x"})", "stop_sequences"},
      {"{" + kHead + kHello + R"(, "stop_sequences": [""]})", "stop_sequences"},
      {"{" + kHead + kHello + R"(, "system": 5})", "system"},
      {"{" + kHead + kHello + R"(, "thinking": {"type": "enabled"}})", "thinking.budget_tokens"},
      {"{" + kHead + kHello + R"(, "thinking": {"type": "sometimes"}})", "thinking"},
      {"{" + kHead + kHello + R"(, "metadata": "u"})", "metadata"},
      {"{" + kHead + R"("messages": []})", "messages"},
      {"{" + kHead + R"("messages": {"role": "user"}})", "messages"},
      {"{" + kHead + R"("messages": [5]})", "messages[0]"},
      {"{" + kHead + R"("messages": [{"role": "system", "content": "x"}]})", "messages[0].role"},
      {"{" + kHead + R"("messages": [{"role": "user"}]})", "messages[0].content"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content[0].text"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": [{"type": "image",
          "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]})",
       "messages[0].content[0]"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": [{"type": "tool_use",
          "id": "t", "name": "f", "input": {}}]}]})",
       "messages[0].content[0]"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": "x"}, {"role": "assistant",
          "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]},
          {"role": "user", "content": "y"}]})",
       "messages[1].content[0].input"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": [{"type": "tool_result",
          "tool_use_id": "t", "is_error": "no"}]}]})",
       "messages[0].content[0].is_error"},
      {"{" + kHead + R"("messages": [{"role": "user", "content": [{"type": "tool_result",
          "tool_use_id": "t", "content": [{"type": "image"}]}]}]})",
       "messages[0].content[0].content[0]"},
      {"{" + kHead + std::string(100000, '[') + "}", ""},
  };
  for (const auto& [body, param] : cases) {
    EXPECT_EQ(rejected_param(body), param) << body.substr(0, 200);
  }
}

TEST(AnthropicRequest, ImagesSayHerdHasNoVision) {
  try {
    parse("{" + kHead + R"("messages": [{"role": "user", "content": [{"type": "document"}]}]})");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_NE(e.message().find("herd has no vision"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace herd::server
