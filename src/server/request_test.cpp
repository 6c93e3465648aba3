// Request parsing: every client mistake is a 400 naming the field; valid fields land in
// the sampler and stop settings.
#include "server/request.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

// The param an invalid body is rejected for (fails the test when it is accepted).
std::string rejected_param(const std::string& body, bool chat = true) {
  try {
    if (chat) {
      parse_chat_request(body);
    } else {
      parse_completion_request(body);
    }
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.to_json()["error"]["param"].is_null()
               ? ""
               : e.to_json()["error"]["param"].get<std::string>();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "<accepted>";
}

const char* kHello = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(Request, ChatFieldsReachTheSampler) {
  const ChatRequest r = parse_chat_request(std::string("{") + kHello + R"(,
      "model": "m", "stream": true, "stream_options": {"include_usage": true},
      "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 12, "min_p": 0.1,
      "seed": 42, "stop": ["a", "bc"], "presence_penalty": 0.5, "frequency_penalty": -0.5,
      "logprobs": true, "top_logprobs": 3, "chat_template_kwargs": {"enable_thinking": false},
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "tool_choice": "auto"})");
  EXPECT_EQ(r.sampling.model, "m");
  EXPECT_TRUE(r.sampling.stream);
  EXPECT_TRUE(r.sampling.include_usage);
  EXPECT_EQ(r.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.sampler.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.sampler.top_p, 0.9f);
  EXPECT_EQ(r.sampling.sampler.top_k, 12);
  EXPECT_FLOAT_EQ(r.sampling.sampler.min_p, 0.1f);
  EXPECT_EQ(r.sampling.sampler.seed, 42u);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_FLOAT_EQ(r.sampling.sampler.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.sampler.frequency_penalty, -0.5f);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tool_choice.kind, ToolChoice::Kind::kAuto);
  EXPECT_FALSE(r.tool_choice.forces_call());
  EXPECT_FALSE(r.sampling.ignore_eos);
  EXPECT_TRUE(parse_chat_request(std::string("{") + kHello + R"(, "ignore_eos": true})")
                  .sampling.ignore_eos);
}

TEST(Request, DefaultsAreOpenAIs) {
  const ChatRequest r = parse_chat_request(std::string("{") + kHello + "}");
  EXPECT_FALSE(r.sampling.stream);
  EXPECT_EQ(r.sampling.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampling.sampler.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.sampler.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_logprobs, -1);
  EXPECT_TRUE(r.tools.is_null());
}

// herd's "speculative" field: each source's tokens per step, or false for none.
TEST(Request, SpeculativeSaysEachSource) {
  const ChatRequest r = parse_chat_request(std::string("{") + kHello + R"(,
      "speculative": {"lookup": 2, "draft": 3, "mtp": 4}})");
  ASSERT_TRUE(r.sampling.speculative.has_value());
  EXPECT_EQ(r.sampling.speculative->lookup, 2);
  EXPECT_EQ(r.sampling.speculative->draft, 3);
  EXPECT_EQ(r.sampling.speculative->mtp, 4);
  const ChatRequest off =
      parse_chat_request(std::string("{") + kHello + R"(, "speculative": false})");
  ASSERT_TRUE(off.sampling.speculative.has_value());
  EXPECT_EQ(off.sampling.speculative->mtp, 0);
  EXPECT_EQ(rejected_param(std::string("{") + kHello + R"(, "speculative": {"mtp": 17}})"), "mtp");
  EXPECT_FALSE(parse_chat_request(std::string("{") + kHello + "}").sampling.speculative);
}

TEST(Request, StopMayBeOneString) {
  const ChatRequest r = parse_chat_request(std::string("{") + kHello + R"(, "stop": "END"})");
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
}

TEST(Request, ContentPartsBecomeText) {
  const ChatRequest r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                   {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(r.messages[0]["content"], "ab");
}

TEST(Request, MistakesNameTheirField) {
  EXPECT_EQ(rejected_param("{not json"), "");
  EXPECT_EQ(rejected_param("[1, 2]"), "");
  EXPECT_EQ(rejected_param("{}"), "messages");
  EXPECT_EQ(rejected_param(R"({"messages": "hi"})"), "messages");
  EXPECT_EQ(rejected_param(R"({"messages": []})"), "messages");
  EXPECT_EQ(rejected_param(R"({"messages": [{"content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(rejected_param(R"({"messages": [{"role": "user", "content": 5}]})"),
            "messages[0].content");
  const std::string m = std::string("{") + kHello + ", ";
  EXPECT_EQ(rejected_param(m + R"("temperature": "hot"})"), "temperature");
  EXPECT_EQ(rejected_param(m + R"("temperature": 3})"), "temperature");
  EXPECT_EQ(rejected_param(m + R"("max_tokens": -1})"), "max_tokens");
  EXPECT_EQ(rejected_param(m + R"("max_tokens": 0})"), "max_tokens");
  EXPECT_EQ(rejected_param(m + R"("seed": 18446744073709551615})"), "seed");
  EXPECT_EQ(rejected_param(m + R"("max_tokens": 18446744073709551615})"), "max_tokens");
  EXPECT_EQ(rejected_param(m + R"("max_tokens": 1.5})"), "max_tokens");
  EXPECT_EQ(rejected_param(m + R"("repetition_penalty": 0})"), "repetition_penalty");
  EXPECT_EQ(rejected_param(m + R"("repetition_penalty": 11})"), "repetition_penalty");
  EXPECT_EQ(rejected_param(m + R"("stream": "yes"})"), "stream");
  EXPECT_EQ(rejected_param(m + R"("stop": [1]})"), "stop");
  EXPECT_EQ(rejected_param(m + R"("top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(rejected_param(m + R"("logprobs": true, "top_logprobs": 21})"), "top_logprobs");
  EXPECT_EQ(rejected_param(m + R"("tools": [{"type": "function"}]})"), "tools[0]");
  EXPECT_EQ(rejected_param(m + R"("tool_choice": "sometimes"})"), "tool_choice");
  EXPECT_EQ(rejected_param(m + R"("chat_template_kwargs": [1]})"), "chat_template_kwargs");
  EXPECT_EQ(rejected_param(m + R"("n": 2})"), "n");
  EXPECT_EQ(rejected_param(m + R"("model": 7})"), "model");
  EXPECT_EQ(rejected_param(m + R"("stream_options": {"include_usage": 1}})"),
            "stream_options.include_usage");
}

TEST(Request, DeepNestingIsRefusedNotRecursedInto) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_chat_request(std::string("{") + kHello + ", \"x\": " + deep + "}");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(e.message().find("deeper than 64"), std::string::npos) << e.message();
  }
}

TEST(Request, CompletionPromptIsTextOrTokenIds) {
  const CompletionRequest text = parse_completion_request(R"({"prompt": "Once", "logprobs": 2})");
  EXPECT_EQ(text.prompt_text, "Once");
  EXPECT_EQ(text.sampling.top_logprobs, 2);
  const CompletionRequest ids = parse_completion_request(R"({"prompt": [1, 2, 3]})");
  EXPECT_FALSE(ids.prompt_text);
  EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(rejected_param(R"({"prompt": [1, "a"]})", false), "prompt");
  EXPECT_EQ(rejected_param(R"({"prompt": [-1]})", false), "prompt");
  EXPECT_EQ(rejected_param(R"({"prompt": []})", false), "prompt");
  EXPECT_EQ(rejected_param(R"({"max_tokens": 3})", false), "prompt");
}

TEST(Request, ErrorHasOpenAIsShape) {
  const ApiError e(404, "no such model", "invalid_request_error", "model", "model_not_found");
  const auto j = e.to_json();
  EXPECT_EQ(j["error"]["message"], "no such model");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  EXPECT_TRUE(ApiError(400, "x").to_json()["error"]["code"].is_null());
}

TEST(Request, ToolChoiceThatForcesACallNeedsItsTool) {
  const std::string m = std::string("{") + kHello + ", ";
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather"}},
                   {"type": "function", "function": {"name": "auto"}}], )";
  // "required" and a named function need tools; a named one must be among them.
  EXPECT_EQ(rejected_param(m + R"("tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(
      rejected_param(m + R"("tool_choice": {"type": "function", "function": {"name": "f"}}})"),
      "tool_choice");
  EXPECT_EQ(rejected_param(m + tools +
                           R"("tool_choice": {"type": "function", "function": {"name": "f"}}})"),
            "tool_choice.function.name");
  EXPECT_EQ(rejected_param(m + tools + R"("tool_choice": {"type": "function"}})"), "tool_choice");

  ChatRequest r = parse_chat_request(m + tools + R"("tool_choice": "required"})");
  EXPECT_EQ(r.tool_choice.kind, ToolChoice::Kind::kRequired);
  EXPECT_TRUE(r.tool_choice.forces_call());
  EXPECT_EQ(tool_names(r.tools), (std::vector<std::string>{"get_weather", "auto"}));
  // A function may be called "auto": the object form names it, unlike the string "auto".
  r = parse_chat_request(m + tools +
                         R"("tool_choice": {"type": "function", "function": {"name": "auto"}}})");
  EXPECT_EQ(r.tool_choice.kind, ToolChoice::Kind::kFunction);
  EXPECT_EQ(r.tool_choice.function, "auto");
  r = parse_chat_request(m + tools + R"("tool_choice": "none"})");
  EXPECT_EQ(r.tool_choice.kind, ToolChoice::Kind::kNone);
  EXPECT_FALSE(r.tool_choice.forces_call());
}

TEST(Request, ResponseFormat) {
  auto chat = [](const std::string& format) {
    return parse_chat_request(std::string("{") + kHello + R"(, "response_format": )" + format +
                              "}");
  };
  EXPECT_EQ(chat(R"({"type": "text"})").response_format.grammar, nullptr);
  EXPECT_EQ(parse_chat_request(std::string("{") + kHello + "}").response_format.grammar, nullptr);
  const ChatRequest object = chat(R"({"type": "json_object"})");
  EXPECT_EQ(object.response_format.kind, ResponseFormat::Kind::kJsonObject);
  ASSERT_NE(object.response_format.grammar, nullptr);
  const ChatRequest schema = chat(R"({"type": "json_schema", "json_schema": {"name": "p",
      "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}},
      "required": ["a"], "additionalProperties": false}}})");
  EXPECT_EQ(schema.response_format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(schema.response_format.name, "p");
  EXPECT_TRUE(schema.response_format.strict);
  ASSERT_NE(schema.response_format.grammar, nullptr);

  auto refused = [](const std::string& format) {
    return rejected_param(std::string("{") + kHello + R"(, "response_format": )" + format + "}");
  };
  EXPECT_EQ(refused("\"json\""), "response_format");
  EXPECT_EQ(refused(R"({"type": "yaml"})"), "response_format.type");
  EXPECT_EQ(refused(R"({"type": "json_schema"})"), "response_format.json_schema");
  EXPECT_EQ(refused(R"({"type": "json_schema", "json_schema": {"schema": {}}})"),
            "response_format.json_schema.name");
  EXPECT_EQ(refused(R"({"type": "json_schema", "json_schema": {"name": "x", "strict": 1}})"),
            "response_format.json_schema.strict");
  // A keyword outside the subset is named, with where it is.
  EXPECT_EQ(refused(R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {
      "type": "object", "properties": {"when": {"type": "string", "format": "date"}}}}})"),
            "response_format.json_schema.schema.properties.when.format");
  try {
    chat(R"({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
        "pattern": "a+"}}})");
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_NE(e.message().find("'pattern'"), std::string::npos) << e.message();
  }
  // The legacy completions take it too.
  const CompletionRequest completion =
      parse_completion_request(R"({"prompt": "x", "response_format": {"type": "json_object"}})");
  EXPECT_EQ(completion.response_format.kind, ResponseFormat::Kind::kJsonObject);
  EXPECT_NE(completion.response_format.grammar, nullptr);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x"})").response_format.grammar, nullptr);
  EXPECT_EQ(rejected_param(R"({"prompt": "x", "response_format": {"type": "yaml"}})", false),
            "response_format.type");
}

TEST(Request, ToolCallArgumentsBecomeObjectsForTheTemplate) {
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"city\":\"Oslo\"}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
      {"id": "c", "type": "function", "function": {"name": "h", "arguments": "[1]"}},
      {"id": "d", "type": "function", "function": {"name": "i", "arguments": {"n": 1}}}]},
    {"role": "tool", "tool_call_id": "a", "content": "{\"t\": 1}"}])");
  const auto out = arguments_as_objects(messages);
  const auto& calls = out[1]["tool_calls"];
  EXPECT_EQ(calls[0]["function"]["arguments"], nlohmann::ordered_json::parse(R"({"city":"Oslo"})"));
  EXPECT_EQ(calls[1]["function"]["arguments"], "not json");  // left for the template
  EXPECT_EQ(calls[2]["function"]["arguments"], "[1]");       // only objects
  EXPECT_EQ(calls[3]["function"]["arguments"],
            messages[1]["tool_calls"][3]["function"]["arguments"]);
  EXPECT_EQ(out[2], messages[2]);  // tool results are the client's text
  const auto filled = null_content_as_empty(messages);
  EXPECT_EQ(filled[1]["content"], "");
  EXPECT_EQ(filled[0], messages[0]);
}

}  // namespace
}  // namespace herd::server
