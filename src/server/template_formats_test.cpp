// The parsers against real chat templates (../shared/chat-templates): the format each
// template implies, and tool calls as the template itself writes them into a conversation
// parsed back to the same name and arguments.
#include <gtest/gtest.h>

#include <cctype>
#include <ctime>
#include <fstream>
#include <iterator>

#include "chat/template.h"
#include "server/argument_types.h"
#include "server/output_parser.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

// gpt-oss's template is not among the shared ones: it is in src/server/testdata.
const char* const kGptOss = "openai-gpt-oss-120b.jinja";

std::string read_template(const std::string& name) {
  std::ifstream in(name == kGptOss ? "src/server/testdata/" + name
                                   : "../shared/chat-templates/templates/" + name);
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const json kTools = json::parse(R"([{"type": "function", "function": {
  "name": "get_weather", "description": "Weather of a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

std::string render(const std::string& source, const json& messages, bool generation_prompt,
                   const json& extra = json::object()) {
  const chat::Template t = chat::Template::parse(source);
  return t.render(chat::chat_variables(messages, &kTools, generation_prompt, "<s>", "</s>", extra));
}

// The assistant turn that `template` writes for a tool call, between `begin` (the last
// occurrence) and `end`, parsed back.
ParsedDelta round_trip(const std::string& name, const std::string& begin, const std::string& end) {
  const std::string source = read_template(name);
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123def", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "abc123def", "content": "sunny"}])");
  const std::string prompt = render(source, messages, false);
  const size_t tool_result = prompt.find("sunny");
  const size_t from = prompt.rfind(begin, tool_result);
  EXPECT_NE(from, std::string::npos) << prompt;
  const size_t to = prompt.find(end, from + begin.size());
  EXPECT_NE(to, std::string::npos) << prompt;
  const std::string reply = prompt.substr(from + begin.size(), to - from - begin.size());
  OutputParserOptions o;
  o.tools = detect_tool_format(source);
  o.harmony = uses_harmony(source);
  o.parameter_types = parameter_types(kTools);
  OutputParser parser(o);
  ParsedDelta all = parser.push(reply);
  all.append(parser.finish());
  return all;
}

// The history `name` renders for a conversation holding a get_weather call.
std::string history_with_call(const std::string& name) {
  const json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123def", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "abc123def", "content": "sunny"}])");
  return render(read_template(name), messages, false);
}

void expect_weather_call(const ParsedDelta& d) {
  ASSERT_EQ(d.tool_calls.size(), 1u) << d.content;
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(d.tool_calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(d.content.find_first_not_of(" \n"), std::string::npos) << d.content;
}

TEST(TemplateFormats, EachFamilysFormatIsDetected) {
  EXPECT_EQ(detect_tool_format(read_template("Qwen-Qwen2.5-7B-Instruct.jinja")),
            ToolFormat::kHermes);
  EXPECT_EQ(detect_tool_format(read_template("Qwen-Qwen3-0.6B.jinja")), ToolFormat::kHermes);
  EXPECT_EQ(
      detect_tool_format(read_template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")),
      ToolFormat::kHermes);
  EXPECT_EQ(detect_tool_format(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            ToolFormat::kLlama3Json);
  EXPECT_EQ(detect_tool_format(read_template("meta-llama-Llama-3.2-3B-Instruct.jinja")),
            ToolFormat::kLlama3Json);
  EXPECT_EQ(detect_tool_format(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")),
            ToolFormat::kMistral);
  EXPECT_EQ(detect_tool_format(read_template("Mistral-Small-3.2-24B-Instruct-2506.jinja")),
            ToolFormat::kMistralCallId);
  EXPECT_EQ(detect_tool_format(read_template("unsloth-mistral-Devstral-Small-2507.jinja")),
            ToolFormat::kMistralArgs);
  EXPECT_EQ(detect_tool_format(read_template("deepseek-ai-DeepSeek-V3.1.jinja")),
            ToolFormat::kDeepSeek);
  EXPECT_EQ(detect_tool_format(read_template("moonshotai-Kimi-K2.jinja")), ToolFormat::kKimi);
  EXPECT_EQ(detect_tool_format(read_template(kGptOss)), ToolFormat::kHarmony);
  EXPECT_TRUE(uses_harmony(read_template(kGptOss)));
  EXPECT_FALSE(uses_harmony(read_template("Qwen-Qwen3-0.6B.jinja")));
  EXPECT_EQ(detect_tool_format(read_template("deepseek-ai-DeepSeek-V3.2.jinja")),
            ToolFormat::kDeepSeekDsml);
  EXPECT_EQ(detect_tool_format(read_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")),
            ToolFormat::kDeepSeekR1);
  // Qwen3-Coder, Qwen3.5 and Nemotron 3 write <tool_call><function=...> XML; other
  // <function=...> formats are not read (Seed-OSS's <seed:tool_call>, Functionary's JSON).
  EXPECT_EQ(detect_tool_format(read_template("Qwen3-Coder.jinja")), ToolFormat::kQwenXml);
  EXPECT_EQ(detect_tool_format(read_template("Qwen3.5-4B.jinja")), ToolFormat::kQwenXml);
  EXPECT_EQ(detect_tool_format(read_template("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja")),
            ToolFormat::kQwenXml);
  EXPECT_EQ(detect_tool_format(read_template("ByteDance-Seed-OSS.jinja")), ToolFormat::kNone);
  EXPECT_EQ(detect_tool_format(read_template("meetkai-functionary-medium-v3.1.jinja")),
            ToolFormat::kNone);
  EXPECT_EQ(detect_tool_format(read_template("zai-org-GLM-4.7-Flash.jinja")), ToolFormat::kGlm);
  EXPECT_EQ(detect_tool_format(read_template("zai-org-GLM-5.2.jinja")), ToolFormat::kGlm);
  EXPECT_EQ(detect_tool_format(read_template("deepseek-ai-DeepSeek-V4.jinja")),
            ToolFormat::kDeepSeekV4);
  EXPECT_EQ(detect_tool_format(read_template("google-gemma-4-31B-it.jinja")), ToolFormat::kGemma);
  EXPECT_EQ(detect_tool_format(read_template("google-gemma-2-2b-it.jinja")), ToolFormat::kNone);
}

TEST(TemplateFormats, QwenToolCallRoundTrips) {
  expect_weather_call(
      round_trip("Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>assistant\n", "<|im_end|>"));
}

TEST(TemplateFormats, Llama3ToolCallRoundTrips) {
  expect_weather_call(round_trip("meta-llama-Llama-3.1-8B-Instruct.jinja",
                                 "<|start_header_id|>assistant<|end_header_id|>\n\n",
                                 "<|eot_id|>"));
}

TEST(TemplateFormats, MistralToolCallRoundTrips) {
  expect_weather_call(round_trip("mistralai-Mistral-Nemo-Instruct-2407.jinja", "[/INST]", "</s>"));
}

TEST(TemplateFormats, DeepSeekV31ToolCallRoundTrips) {
  expect_weather_call(round_trip("deepseek-ai-DeepSeek-V3.1.jinja",
                                 "<｜Assistant｜><think></think>", "<｜end▁of▁sentence｜>"));
}

TEST(TemplateFormats, DeepSeekR1ToolCallRoundTrips) {
  // The template writes an empty <｜Assistant｜> turn after the call: the call's is the first.
  expect_weather_call(round_trip("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                                 "Paris?<｜Assistant｜>", "<｜end▁of▁sentence｜>"));
}

TEST(TemplateFormats, DeepSeekV32ToolCallRoundTrips) {
  expect_weather_call(round_trip("deepseek-ai-DeepSeek-V3.2.jinja", "<｜Assistant｜></think>",
                                 "<｜end▁of▁sentence｜>"));
}

TEST(TemplateFormats, QwenXmlToolCallRoundTrips) {
  expect_weather_call(round_trip("Qwen3.5-4B.jinja", "</think>\n\n", "<|im_end|>"));
  expect_weather_call(round_trip("Qwen3-Coder.jinja", "<|im_start|>assistant", "<|im_end|>"));
  expect_weather_call(
      round_trip("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "</think>", "<|im_end|>"));
}

TEST(TemplateFormats, GlmToolCallRoundTrips) {
  expect_weather_call(round_trip("zai-org-GLM-4.7-Flash.jinja", "</think>", "<|observation|>"));
  expect_weather_call(round_trip("zai-org-GLM-5.2.jinja", "</think>", "<|observation|>"));
}

TEST(TemplateFormats, DeepSeekV4ToolCallRoundTrips) {
  expect_weather_call(round_trip("deepseek-ai-DeepSeek-V4.jinja", "<｜Assistant｜></think>",
                                 "<｜end▁of▁sentence｜>"));
}

TEST(TemplateFormats, Gemma4ToolCallRoundTrips) {
  expect_weather_call(
      round_trip("google-gemma-4-31B-it.jinja", "<|turn>model\n", "<|tool_response>"));
}

TEST(TemplateFormats, KimiToolCallRoundTrips) {
  const ParsedDelta d = round_trip("moonshotai-Kimi-K2.jinja",
                                   "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>");
  expect_weather_call(d);
  EXPECT_EQ(d.tool_calls.at(0).id, "functions.get_weather:0");  // as the template numbers it
}

TEST(TemplateFormats, GptOssToolCallRoundTrips) {
  expect_weather_call(round_trip(kGptOss, "<|start|>assistant", "<|call|>"));
}

// A forced call's opening is the text the family's own template writes for a call, so the
// model continues what it was trained on; and the parser, fed the rest of that call, reads
// it back as the call.
TEST(TemplateFormats, ForcedCallOpeningIsHowTheTemplateWritesACall) {
  for (const char* name :
       {"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja", "unsloth-mistral-Devstral-Small-2507.jinja",
        "deepseek-ai-DeepSeek-V3.1.jinja", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        "moonshotai-Kimi-K2.jinja", kGptOss, "Qwen3.5-4B.jinja", "Qwen3-Coder.jinja",
        "zai-org-GLM-4.7-Flash.jinja", "zai-org-GLM-5.2.jinja", "deepseek-ai-DeepSeek-V4.jinja",
        "google-gemma-4-31B-it.jinja", "deepseek-ai-DeepSeek-V3.2.jinja",
        "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"}) {
    SCOPED_TRACE(name);
    const std::string history = history_with_call(name);
    OutputParserOptions o;
    o.tools = detect_tool_format(read_template(name));
    o.harmony = uses_harmony(read_template(name));
    o.forced_call = true;
    for (const std::string forced : {"get_weather", ""}) {
      o.forced_name = forced;
      const std::string opening = forced_reply_opening(o);
      const size_t at = history.rfind(opening);  // the call, not a system prompt's example
      ASSERT_NE(at, std::string::npos) << opening << "\n" << history;
      // The rest of the call as the template wrote it, up to the end of the turn.
      std::string rest = history.substr(at + opening.size());
      for (const char* end :
           {"</tool_call>", "<|eot_id|>", "</s>", "<｜tool▁call▁end｜>", "<|tool_call_end|>",
            "<|call|>", "</｜DSML｜tool_calls>", "</｜DSML｜function_calls>", "<tool_call|>"}) {
        rest = rest.substr(0, rest.find(end));
      }
      OutputParser parser(o);
      ParsedDelta d = parser.push(rest);
      d.append(parser.finish());
      expect_weather_call(d);
    }
  }
}

// Mistral Small 3.2 writes name[CALL_ID]id[ARGS]: the forced opening writes the id too (the
// reply's own id, 9 letters and digits), and the call read back, sent as history with that
// id, is accepted by the template and rendered with the same opening.
TEST(TemplateFormats, MistralSmallForcedCallCarriesItsCallId) {
  const std::string name = "Mistral-Small-3.2-24B-Instruct-2506.jinja";
  OutputParserOptions o;
  o.tools = detect_tool_format(read_template(name));
  o.forced_call = true;
  o.forced_name = "get_weather";
  o.id_prefix = "call_7_";
  const std::string id = tool_call_id(o, 0);
  ASSERT_EQ(id.size(), 9u);
  for (char c : id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
  const std::string opening = forced_reply_opening(o);
  EXPECT_EQ(opening, "[TOOL_CALLS]get_weather[CALL_ID]" + id + "[ARGS]");
  OutputParser parser(o);
  ParsedDelta d = parser.push(R"({"city": "Paris"})");
  d.append(parser.finish());
  expect_weather_call(d);
  ASSERT_EQ(d.tool_calls[0].id, id);
  json messages = json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"}])");
  messages[1]["tool_calls"][0]["id"] = id;
  messages[2]["tool_call_id"] = id;
  const std::string history = render(read_template(name), messages, false);
  EXPECT_NE(history.find(opening), std::string::npos) << history;
  // "required": the model writes name[CALL_ID]id[ARGS]; the parser reads the call.
  o.forced_name = "";
  OutputParser required(o);
  ParsedDelta r = required.push(R"(get_weather[CALL_ID]abc123def[ARGS]{"city": "Paris"})");
  r.append(required.finish());
  expect_weather_call(r);
}

TEST(TemplateFormats, ReasoningOpenedByTheGenerationPrompt) {
  const json hello = json::parse(R"([{"role": "user", "content": "Hi"}])");
  const std::string r1 = read_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
  EXPECT_TRUE(
      prompt_opens_reasoning(render(r1, hello, true, json::parse(R"({"enable_thinking": true})"))));
  EXPECT_FALSE(prompt_opens_reasoning(render(r1, hello, true)));  // this variant closes it
  EXPECT_TRUE(prompt_opens_reasoning(render(read_template("Qwen-QwQ-32B.jinja"), hello, true,
                                            json::parse(R"({"enable_thinking": true})"))));
  const std::string qwen3 = read_template("Qwen-Qwen3-0.6B.jinja");
  EXPECT_FALSE(prompt_opens_reasoning(render(qwen3, hello, true)));  // the model opens it
  EXPECT_FALSE(prompt_opens_reasoning(
      render(qwen3, hello, true, json::parse(R"({"enable_thinking": false})"))));  // closed
  // Qwen3.5, GLM-4.7 and GLM-5 open it unless enable_thinking is false.
  for (const char* name :
       {"Qwen3.5-4B.jinja", "zai-org-GLM-4.7-Flash.jinja", "zai-org-GLM-5.2.jinja"}) {
    SCOPED_TRACE(name);
    const std::string source = read_template(name);
    EXPECT_TRUE(prompt_opens_reasoning(render(source, hello, true)));
    EXPECT_TRUE(prompt_opens_reasoning(
        render(source, hello, true, json::parse(R"({"enable_thinking": true})"))));
    EXPECT_FALSE(prompt_opens_reasoning(
        render(source, hello, true, json::parse(R"({"enable_thinking": false})"))));
  }
  // Gemma 4 thinks in its own channel, which the model opens; the prompt writes it closed
  // (empty) when thinking is off.
  const std::string gemma = read_template("google-gemma-4-31B-it.jinja");
  const auto markers = reasoning_markers(gemma);
  ASSERT_TRUE(markers.has_value());
  EXPECT_EQ(markers->open, "<|channel>thought");
  EXPECT_EQ(markers->close, "<channel|>");
  EXPECT_FALSE(prompt_opens_reasoning(render(gemma, hello, true), *markers));
  EXPECT_FALSE(prompt_opens_reasoning(
      render(gemma, hello, true, json::parse(R"({"enable_thinking": true})")), *markers));
  EXPECT_EQ(reasoning_markers(read_template("Qwen3.5-4B.jinja"))->open, "<think>");
  EXPECT_FALSE(reasoning_markers(read_template("google-gemma-2-2b-it.jinja")).has_value());
  // DeepSeek V4 thinks only when asked (thinking, or enable_thinking).
  const std::string v4 = read_template("deepseek-ai-DeepSeek-V4.jinja");
  EXPECT_FALSE(prompt_opens_reasoning(render(v4, hello, true)));
  EXPECT_TRUE(
      prompt_opens_reasoning(render(v4, hello, true, json::parse(R"({"thinking": true})"))));
  EXPECT_TRUE(
      prompt_opens_reasoning(render(v4, hello, true, json::parse(R"({"enable_thinking": true})"))));
}

// The gpt-oss template through herd's Jinja engine, on the shared cases rendered by Python's
// Jinja2 as transformers renders them (src/server/testdata/gen_gpt_oss_expected.py): tools,
// tool calls and results included, byte for byte.
TEST(TemplateFormats, GptOssRendersAsTransformersDoes) {
  std::ifstream in("src/server/testdata/gpt-oss-expected.jsonl");
  ASSERT_TRUE(in) << "run from the repository root";
  const chat::Template t = chat::Template::parse(read_template(kGptOss));
  chat::RenderOptions options;
  options.now = [] {  // the cases' clock: 2026-01-15 12:00:00
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mday = 15;
    tm.tm_hour = 12;
    const time_t time = timegm(&tm);
    gmtime_r(&time, &tm);
    return tm;
  };
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    const json c = json::parse(line);
    SCOPED_TRACE(c["case"].get<std::string>());
    const json& tools = c["tools"];
    const std::string out =
        t.render(chat::chat_variables(c["messages"], tools.is_null() ? nullptr : &tools,
                                      c["add_generation_prompt"].get<bool>(),
                                      c["bos_token"].get<std::string>(),
                                      c["eos_token"].get<std::string>(), c["extra"]),
                 options);
    EXPECT_EQ(out, c["expected"].get<std::string>());
    ++n;
  }
  EXPECT_EQ(n, 19);
}

}  // namespace
}  // namespace herd::server
