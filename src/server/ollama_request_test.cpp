// Ollama's request bodies: options reach the sampler, messages become OpenAI's shape (calls
// with ids, results with the ids of their calls), and every client mistake is a 400 naming
// the field.
#include "server/ollama_request.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

using ojson = nlohmann::ordered_json;

// The field an invalid body is rejected for (fails the test when it is accepted).
std::string rejected_param(const std::string& body, bool chat = true) {
  try {
    if (chat) {
      parse_ollama_chat(body);
    } else {
      parse_ollama_generate(body);
    }
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body;
    const auto param = e.to_json()["error"]["param"];
    return param.is_null() ? "" : param.get<std::string>();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "<accepted>";
}

TEST(OllamaRequest, ChatOptionsReachTheSampler) {
  const OllamaChatRequest r = parse_ollama_chat(R"({"model": "m:latest",
      "messages": [{"role": "user", "content": "hi"}], "stream": false, "keep_alive": "5m",
      "options": {"temperature": 0.5, "top_k": 12, "top_p": 0.7, "min_p": 0.1,
                  "num_predict": 9, "stop": ["a", "bc"], "seed": 42, "repeat_penalty": 1.3,
                  "repeat_last_n": 32, "presence_penalty": 0.5, "frequency_penalty": -0.5,
                  "num_ctx": 99999, "num_thread": 4, "mirostat": 0},
      "format": "json", "think": false})");
  EXPECT_FALSE(r.load_only);
  const SamplingRequest& s = r.chat.sampling;
  EXPECT_EQ(s.model, "m:latest");
  EXPECT_FALSE(s.stream);
  EXPECT_EQ(s.max_tokens, 9);
  EXPECT_FLOAT_EQ(s.sampler.temperature, 0.5f);
  EXPECT_EQ(s.sampler.top_k, 12);
  EXPECT_FLOAT_EQ(s.sampler.top_p, 0.7f);
  EXPECT_FLOAT_EQ(s.sampler.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.sampler.repeat_penalty, 1.3f);
  EXPECT_EQ(s.sampler.penalty_last_n, 32);
  EXPECT_FLOAT_EQ(s.sampler.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.sampler.frequency_penalty, -0.5f);
  EXPECT_EQ(s.sampler.seed, 42u);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.chat.response_format.kind, ResponseFormat::Kind::kJsonObject);
  EXPECT_NE(r.chat.response_format.grammar, nullptr);
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], false);
}

TEST(OllamaRequest, DefaultsAreOllamas) {
  const OllamaChatRequest r =
      parse_ollama_chat(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_TRUE(r.chat.sampling.stream);  // Ollama streams unless told not to
  EXPECT_EQ(r.chat.sampling.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.chat.sampling.sampler.temperature, 0.8f);
  EXPECT_EQ(r.chat.sampling.sampler.top_k, 40);
  EXPECT_FLOAT_EQ(r.chat.sampling.sampler.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.chat.sampling.sampler.repeat_penalty, 1.1f);
  EXPECT_EQ(r.chat.response_format.grammar, nullptr);
  EXPECT_TRUE(r.chat.tools.is_null());
  // num_predict -1 and -2 both run until the context is full; integers written as 40.0 pass.
  EXPECT_EQ(parse_ollama_chat(R"({"model": "m", "options": {"num_predict": -2, "top_k": 5.0}})")
                .chat.sampling.max_tokens,
            -1);
}

TEST(OllamaRequest, NoMessagesOrPromptOnlyLoads) {
  EXPECT_TRUE(parse_ollama_chat(R"({"model": "m"})").load_only);
  EXPECT_TRUE(parse_ollama_chat(R"({"model": "m", "messages": []})").load_only);
  EXPECT_TRUE(parse_ollama_generate(R"({"model": "m"})").load_only);
  EXPECT_TRUE(parse_ollama_generate(R"({"model": "m", "prompt": ""})").load_only);
  EXPECT_FALSE(parse_ollama_generate(R"({"model": "m", "prompt": "x"})").load_only);
}

TEST(OllamaRequest, MessagesTakeOpenAIsShape) {
  const OllamaChatRequest r = parse_ollama_chat(R"({"model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather and time?", "images": []},
      {"role": "assistant", "content": "", "thinking": "Two calls.", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
        {"function": {"name": "get_time", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_name": "get_time", "content": "12:00"},
      {"role": "tool", "content": "3 C"},
      {"role": "user", "content": "Thanks"}],
      "tools": [{"type": "function", "function": {"name": "get_weather"}},
                {"type": "function", "function": {"name": "get_time"}}]})");
  const ojson& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], ojson({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_FALSE(m[1].contains("images"));
  EXPECT_EQ(m[2]["reasoning_content"], "Two calls.");
  ASSERT_EQ(m[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], ojson({{"city", "Oslo"}}));
  const std::string weather = m[2]["tool_calls"][0]["id"], time = m[2]["tool_calls"][1]["id"];
  EXPECT_NE(weather, time);
  // A result names its tool: it answers that call; one that does not, the first unanswered.
  EXPECT_EQ(m[3]["tool_call_id"], time);
  EXPECT_EQ(m[3]["name"], "get_time");
  EXPECT_EQ(m[4]["tool_call_id"], weather);
  EXPECT_EQ(r.chat.tools.size(), 2u);
}

TEST(OllamaRequest, ThinkAndToolChoice) {
  const OllamaChatRequest r = parse_ollama_chat(R"({"model": "m", "think": "low",
      "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "f"}}})");
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r.chat.template_kwargs["reasoning_effort"], "low");
  EXPECT_EQ(r.chat.tool_choice.kind, ToolChoice::Kind::kFunction);
  EXPECT_EQ(r.chat.tool_choice.function, "f");
}

TEST(OllamaRequest, FormatSchemaBecomesAGrammar) {
  const OllamaGenerateRequest r = parse_ollama_generate(R"({"model": "m", "prompt": "p",
      "format": {"type": "object", "properties": {"a": {"type": "integer"}}}, "raw": true,
      "system": "s"})");
  EXPECT_EQ(r.format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_NE(r.format.grammar, nullptr);
  EXPECT_TRUE(r.raw);
  EXPECT_EQ(r.prompt, "p");
  EXPECT_EQ(r.system, "s");
  EXPECT_EQ(parse_ollama_generate(R"({"model": "m", "prompt": "p", "format": ""})").format.grammar,
            nullptr);
}

TEST(OllamaRequest, MistakesAre400sNamingTheField) {
  const std::string hi = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(rejected_param("[]"), "");
  EXPECT_EQ(rejected_param("{"), "");
  EXPECT_EQ(rejected_param("{" + hi + "}"), "model");
  EXPECT_EQ(rejected_param(R"({"model": "", )" + hi + "}"), "model");
  EXPECT_EQ(rejected_param(R"({"model": 3, )" + hi + "}"), "model");
  EXPECT_EQ(rejected_param(R"({"model": "m", "stream": "yes"})"), "stream");
  EXPECT_EQ(rejected_param(R"({"model": "m", "messages": {}})"), "messages");
  EXPECT_EQ(rejected_param(R"({"model": "m", "messages": [3]})"), "messages");
  EXPECT_EQ(rejected_param(R"({"model": "m", "messages": [{"content": "x"}]})"),
            "messages[0].role");
  EXPECT_EQ(rejected_param(R"({"model": "m", "messages": [{"role": "user", "content": 5}]})"),
            "messages[0].content");
  EXPECT_EQ(
      rejected_param(
          R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})"),
      "messages[0].images");
  EXPECT_EQ(
      rejected_param(
          R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"name": "f"}]}]})"),
      "messages[0].tool_calls[0]");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": []})"), "options");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"temperature": "hot"}})"),
            "options.temperature");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"top_p": 2}})"), "options.top_p");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"top_k": 1.5}})"), "options.top_k");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"num_predict": 1e300}})"),
            "options.num_predict");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"num_predict": 18446744073709551615}})"),
            "options.num_predict");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"seed": 9223372036854775808.0}})"),
            "options.seed");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"num_predict": -3}})"),
            "options.num_predict");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"repeat_penalty": 0}})"),
            "options.repeat_penalty");
  EXPECT_EQ(rejected_param(R"({"model": "m", "options": {"stop": [1]}})"), "options.stop");
  EXPECT_EQ(rejected_param(R"({"model": "m", "format": "xml"})"), "format");
  EXPECT_EQ(rejected_param(R"({"model": "m", "format": {"type": "string", "pattern": "a+"}})")
                .rfind("format", 0),
            0u);
  EXPECT_EQ(rejected_param(R"({"model": "m", "think": "very"})"), "think");
  EXPECT_EQ(rejected_param(R"({"model": "m", "keep_alive": []})"), "keep_alive");
  EXPECT_EQ(rejected_param(R"({"model": "m", "tools": {}})"), "tools");
  EXPECT_EQ(rejected_param(R"({"model": "m", "tools": [{"function": {}}]})"), "tools[0]");
  EXPECT_EQ(rejected_param(R"({"model": "m", "tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(rejected_param(R"({"model": "m", "prompt": 3})", false), "prompt");
  EXPECT_EQ(rejected_param(R"({"model": "m", "prompt": "p", "template": "{{ .Prompt }}"})", false),
            "template");
  EXPECT_EQ(rejected_param(R"({"model": "m", "prompt": "p", "suffix": "end"})", false), "suffix");
  EXPECT_EQ(rejected_param(R"({"model": "m", "prompt": "p", "images": ["aGk="]})", false),
            "images");
  EXPECT_EQ(rejected_param(R"({"model": "m", "prompt": "p", "context": [1, 2]})", false),
            "context");
  EXPECT_EQ(rejected_param(R"({"model": "m", "prompt": "p", "raw": 1})", false), "raw");
  // Deep nesting is refused before it is built.
  EXPECT_EQ(rejected_param(R"({"model": "m", "format": )" + std::string(5000, '[') +
                           std::string(5000, ']') + "}"),
            "");
}

TEST(OllamaRequest, ModelNamesWithOrWithoutLatest) {
  check_ollama_model("qwen", "qwen");
  check_ollama_model("qwen:latest", "qwen");
  try {
    check_ollama_model("qwen:7b", "qwen");
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_NE(e.message().find("'qwen:7b' not found"), std::string::npos);
  }
}

}  // namespace
}  // namespace herd::server
