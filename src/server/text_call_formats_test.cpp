// The tool-call formats whose arguments are written as text (Qwen3-Coder's and Qwen3.5's XML,
// GLM's <arg_key>/<arg_value>, DeepSeek V4's DSML, Gemma 4's): read whole, a character at a
// time and in random pieces alike, values typed by the tools' schemas, and broken text read
// as content or as the call it began.
#include <gtest/gtest.h>

#include <span>

#include <nlohmann/json.hpp>

#include "server/argument_types.h"
#include "server/output_parser.h"
#include "server/output_parser_test_util.h"

namespace herd::server {
namespace {

using namespace parser_testing;
using json = nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                   "metric": {"type": "boolean"}, "opts": {"type": "object"},
                   "hours": {"type": "array", "items": {"type": "number"}},
                   "code": {"type": "string"}, "unit": {"enum": ["C", "F"]},
                   "limit": {"type": ["integer", "null"]},
                   "when": {"anyOf": [{"type": "string"}, {"type": "number"}]}}}}},
  {"type": "function", "function": {"name": "now"}}])");

OutputParserOptions options(ToolFormat format, bool typed = true) {
  OutputParserOptions o;
  o.tools = format;
  o.reasoning = true;
  if (typed) o.parameter_types = parameter_types(kTools);
  return o;
}

TEST(ArgumentTypes, FromTheToolsSchemas) {
  const auto types = parameter_types(kTools);
  EXPECT_EQ(types->of("get_weather", "city"), kJsonString);
  EXPECT_EQ(types->of("get_weather", "days"), kJsonNumber);
  EXPECT_EQ(types->of("get_weather", "metric"), kJsonBoolean);
  EXPECT_EQ(types->of("get_weather", "opts"), kJsonObject);
  EXPECT_EQ(types->of("get_weather", "hours"), kJsonArray);
  EXPECT_EQ(types->of("get_weather", "unit"), kJsonString);  // from its enum's values
  EXPECT_EQ(types->of("get_weather", "limit"), kJsonNumber | kJsonNull);
  EXPECT_EQ(types->of("get_weather", "when"), kJsonString | kJsonNumber);
  EXPECT_EQ(types->of("get_weather", "nope"), kJsonAny);
  EXPECT_EQ(types->of("now", "x"), kJsonAny);
  EXPECT_EQ(types->of("unknown", "x"), kJsonAny);
  EXPECT_TRUE(parameter_types(json())->functions.empty());
}

TEST(ArgumentTypes, ValuesTypedByTheirSchema) {
  EXPECT_EQ(typed_value("007", kJsonString), "\"007\"");
  EXPECT_EQ(typed_value("say \"hi\"\n", kJsonString), "\"say \\\"hi\\\"\\n\"");
  EXPECT_EQ(typed_value(" 3 ", kJsonNumber), "3");
  EXPECT_EQ(typed_value("three", kJsonNumber), "\"three\"");  // not a number: kept as text
  EXPECT_EQ(typed_value("True", kJsonBoolean), "true");       // Python's str()
  EXPECT_EQ(typed_value("false", kJsonBoolean), "false");
  EXPECT_EQ(typed_value("None", kJsonNumber | kJsonNull), "null");
  EXPECT_EQ(typed_value("{\"a\": [1, 2]}", kJsonObject), "{\"a\":[1,2]}");
  EXPECT_EQ(typed_value("[1, 2]", kJsonObject), "\"[1, 2]\"");  // not the schema's type
  EXPECT_EQ(typed_value("12", kJsonString | kJsonNumber), "12");
  EXPECT_EQ(typed_value("noon", kJsonString | kJsonNumber), "\"noon\"");
  // Undescribed: JSON when it parses, else text (Python's spellings are text then).
  EXPECT_EQ(typed_value("3.5", kJsonAny), "3.5");
  EXPECT_EQ(typed_value("Paris", kJsonAny), "\"Paris\"");
  EXPECT_EQ(typed_value("True", kJsonAny), "\"True\"");
  EXPECT_EQ(typed_value("", kJsonAny), "\"\"");
  // Deeper than the bounded parser allows: text.
  const std::string deep(200, '[');
  EXPECT_EQ(typed_value(deep, kJsonAny), "\"" + deep + "\"");
}

TEST(TextCallFormats, QwenXmlCallsAfterReasoning) {
  const ParsedDelta d =
      both(options(ToolFormat::kQwenXml),
           "<think>\nNeed two tools.\n</think>\n\nLet me check.\n\n<tool_call>\n"
           "<function=get_weather>\n<parameter=city>\nSão \"Paulo\"\n</parameter>\n"
           "<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n"
           "</parameter>\n<parameter=code>\n007\n</parameter>\n"
           "<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n"
           "<parameter=hours>\n[1.5, 2]\n</parameter>\n</function>\n</tool_call>\n"
           "<tool_call>\n<function=now>\n</function>\n</tool_call>");
  EXPECT_EQ(d.reasoning, "\nNeed two tools.\n");
  EXPECT_EQ(d.content, "Let me check.\n\n");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments,
            R"({"city":"São \"Paulo\"","days":3,"metric":true,"code":"007","opts":{"a":[1,2]},)"
            R"("hours":[1.5,2]})");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  EXPECT_EQ(d.tool_calls[1].index, 1);
}

TEST(TextCallFormats, QwenXmlValuesKeepTheirInnerLines) {
  const ParsedDelta d = both(options(ToolFormat::kQwenXml),
                             "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\n\n"
                             "line 3\n\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  // One newline after the opening and one before the closing are the format's.
  EXPECT_EQ(json::parse(d.tool_calls[0].arguments)["city"], "line 1\n\nline 3\n");
}

TEST(TextCallFormats, QwenXmlUntypedValues) {
  const ParsedDelta d = both(options(ToolFormat::kQwenXml, false),
                             "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n"
                             "<parameter=s>\nParis\n</parameter>\n<parameter=o>\n{\"k\": null}\n"
                             "</parameter>\n<parameter=b>\nTrue\n</parameter>\n</function>\n"
                             "</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"n":3,"s":"Paris","o":{"k":null},"b":"True"})");
}

// The name as soon as it is complete; a string value as it is written; any other value once
// whole (it may still turn out to be text).
TEST(TextCallFormats, QwenXmlCallsStreamAsPieces) {
  OutputParser p(options(ToolFormat::kQwenXml));
  ParsedDelta all = p.push("Sure.<tool_call>\n<function=get_wea");
  EXPECT_EQ(all.content, "Sure.");
  EXPECT_TRUE(all.tool_calls.empty());
  ParsedDelta d = p.push("ther>\n<parameter=city>\nPa");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].id, "call_0");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Pa");
  all.append(d);
  d = p.push("ris\n</parameter>\n<parameter=days>\n1");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "");
  EXPECT_EQ(d.tool_calls[0].arguments, "ris\",\"days\":");
  all.append(d);
  d = p.push("2\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "12}");
  all.append(d);
  all.append(p.finish());
  ASSERT_EQ(all.tool_calls.size(), 1u);
  EXPECT_EQ(all.tool_calls[0].arguments, R"({"city":"Paris","days":12})");
  EXPECT_EQ(all.content, "Sure.");
}

TEST(TextCallFormats, QwenXmlMalformed) {
  const OutputParserOptions o = options(ToolFormat::kQwenXml);
  // No function in the block: text.
  ParsedDelta d = both(o, "<tool_call>\nnothing</tool_call> after", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call>\nnothing</tool_call> after");
  // Cut off inside a value, or a parameter's closing left out: the call, closed.
  d = both(o, "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Oslo"})");
  d = both(o, "<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</function></tool_call>",
           false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"days":2})");
  d = both(o, "<tool_call>\n<function=get_weather>\n<parameter=da", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
  // The name never complete: text.
  d = both(o, "<tool_call>\n<function=get_wea", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call>\n<function=get_wea");
  // A Hermes-style JSON call in the block is read as one.
  d = both(o, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "now");
}

TEST(TextCallFormats, GlmCalls) {
  OutputParserOptions o = options(ToolFormat::kGlm);
  o.starts_in_reasoning = true;  // GLM-4.7's generation prompt opens <think>
  // GLM-4.7 and GLM-5 write the pairs back to back.
  ParsedDelta d = both(o,
                       "Need the weather.</think>On it.<tool_call>get_weather<arg_key>city"
                       "</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2"
                       "</arg_value><arg_key>opts</arg_key><arg_value>{\"x\": 1}</arg_value>"
                       "</tool_call><tool_call>now</tool_call>");
  EXPECT_EQ(d.reasoning, "Need the weather.");
  EXPECT_EQ(d.content, "On it.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Paris","days":2,"opts":{"x":1}})");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  // GLM-4.5 and 4.6 put newlines between; a string keeps its own spaces.
  o.starts_in_reasoning = false;
  d = both(o,
           "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> New York</arg_value>\n"
           "<arg_key>code</arg_key>\n<arg_value>12</arg_value>\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":" New York","code":"12"})");
  EXPECT_EQ(d.content, "");
}

TEST(TextCallFormats, GlmCallsStreamAsPieces) {
  OutputParser p(options(ToolFormat::kGlm));
  ParsedDelta all = p.push("<tool_call>get_weather");
  EXPECT_TRUE(all.tool_calls.empty());  // the name may go on
  ParsedDelta d = p.push("<arg_key>city</arg_key><arg_value>Ber");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Ber");
  all.append(d);
  all.append(p.push("lin</arg_value></tool_call>"));
  all.append(p.finish());
  ASSERT_EQ(all.tool_calls.size(), 1u);
  EXPECT_EQ(all.tool_calls[0].arguments, R"({"city":"Berlin"})");
}

TEST(TextCallFormats, GlmMalformed) {
  const OutputParserOptions o = options(ToolFormat::kGlm);
  ParsedDelta d = both(o, "<tool_call></tool_call>x", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call></tool_call>x");
  // Cut inside a value, a key without a value: the call, closed.
  d = both(o, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Ro", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Ro"})");
  d = both(o, "<tool_call>get_weather<arg_key>city</arg_key></tool_call>", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
}

// A marker mentioned in prose opens no call: its name would hold spaces.
TEST(TextCallFormats, ProseMentioningAMarkerIsContent) {
  struct Case {
    ToolFormat format;
    std::string text;
  };
  const Case cases[] = {
      {ToolFormat::kGlm, "Write <tool_call> then the name."},
      {ToolFormat::kGlm, "Write <tool_call> and the name\nthen</tool_call> ok"},
      {ToolFormat::kQwenXml, "Use <tool_call> and <function=the name> tags.</tool_call>"},
      {ToolFormat::kGemma, "Gemma writes <|tool_call>call:a name{...}<tool_call|> then"},
      {ToolFormat::kGemma, "Gemma writes <|tool_call>as text"},
  };
  // Spaces after a name are not the name's, nor is a marker cut between pieces
  // (output_parser_fuzz: the pieces read "f" and 300 spaces then "<arg_k" as a long name).
  const ParsedDelta spaced = both(options(ToolFormat::kGlm),
                                  "<tool_call>f" + std::string(300, ' ') + "<arg_key>s</arg_key>" +
                                      "<arg_value>x</arg_value></tool_call>");
  ASSERT_EQ(spaced.tool_calls.size(), 1u);
  EXPECT_EQ(spaced.tool_calls[0].arguments, R"({"s":"x"})");
  // A "name" longer than any is not waited on to its end.
  const std::string long_text(300, 'x');
  const Case long_cases[] = {
      {ToolFormat::kGlm, "<tool_call>" + long_text + "<arg_key>a</arg_key></tool_call>"},
      {ToolFormat::kQwenXml, "<tool_call>\n<function=" + long_text + ">\n</function></tool_call>"},
      {ToolFormat::kGemma, "<|tool_call>call:" + long_text + "{}<tool_call|>"},
  };
  for (const auto& list : {std::span<const Case>(cases), std::span<const Case>(long_cases)}) {
    for (const Case& c : list) {
      SCOPED_TRACE(c.text.substr(0, 60));
      const ParsedDelta d = both(options(c.format), c.text, false);
      EXPECT_TRUE(d.tool_calls.empty());
      EXPECT_EQ(d.content, c.text);
    }
  }
  // Forced, the block holds the call whatever is written.
  OutputParserOptions o = options(ToolFormat::kGlm);
  o.forced_call = true;
  o.forced_name = "now";
  const ParsedDelta d = both(o, " is not\na name</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "now");
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
}

TEST(TextCallFormats, DeepSeekV4Dsml) {
  OutputParserOptions o = options(ToolFormat::kDeepSeekV4);
  o.starts_in_reasoning = true;  // thinking mode: the prompt ends with <think>
  const ParsedDelta d =
      both(o,
           "Plan.</think>Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
           "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
           "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
           "</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  EXPECT_EQ(d.reasoning, "Plan.");
  EXPECT_EQ(d.content, "Checking.\n\n");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Paris","days":2})");
  // V3.2's block name is not V4's.
  EXPECT_EQ(both(o, "</think><｜DSML｜function_calls>", false).content, "<｜DSML｜function_calls>");
}

TEST(TextCallFormats, GemmaCalls) {
  const ParsedDelta d = both(
      options(ToolFormat::kGemma),
      "Looking.<|tool_call>call:get_weather{city:<|\"|>São, \"Paulo\"<|\"|>,days:3,"
      "opts:{units:<|\"|>C<|\"|>,list:[1.5,<|\"|>a:b<|\"|>,true,null,None]},ok:false,note:maybe}"
      "<tool_call|><|tool_call>call:now{}<tool_call|>");
  EXPECT_EQ(d.content, "Looking.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments,
            R"({"city":"São, \"Paulo\"","days":3,"opts":{"units":"C","list":[1.5,"a:b",true,)"
            R"(null,null]},"ok":false,"note":"maybe"})");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
}

// Gemma 4 thinks in <|channel>thought ... <channel|>, which it opens itself.
TEST(TextCallFormats, GemmaThinking) {
  OutputParserOptions o = options(ToolFormat::kGemma);
  set_reasoning(o, "{{ '<|channel>thought\\n<channel|>' }}", "<|turn>model\n");
  EXPECT_TRUE(o.reasoning);
  EXPECT_FALSE(o.starts_in_reasoning);  // Gemma 4 opens it itself
  EXPECT_EQ(o.reasoning_markers.close, "<channel|>");
  const ParsedDelta d = both(o,
                             "<|channel>thought\nThe weather.<channel|>Let me look."
                             "<|tool_call>call:now{}<tool_call|>");
  EXPECT_EQ(d.reasoning, "\nThe weather.");
  EXPECT_EQ(d.content, "Let me look.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "now");
  // <think> is text to Gemma.
  EXPECT_EQ(both(o, "<think>x</think>", false).content, "<think>x</think>");
}

TEST(TextCallFormats, GemmaMalformed) {
  const OutputParserOptions o = options(ToolFormat::kGemma);
  ParsedDelta d = both(o, "<|tool_call><tool_call|>x", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<|tool_call><tool_call|>x");
  // Cut short: what was written, its string and containers closed.
  d = both(o, "<|tool_call>call:f{a:[1,{b:<|\"|>x y", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"a":[1,{"b":"x y"}]})");
}

// Forced calls: the opening at the end of the prompt, the rest the model's.
TEST(TextCallFormats, ForcedOpenings) {
  EXPECT_EQ(forced_call_prefix(ToolFormat::kQwenXml, "f"), "<tool_call>\n<function=f>\n");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kQwenXml, ""), "<tool_call>\n<function=");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kGlm, "f"), "<tool_call>f");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kGlm, ""), "<tool_call>");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kDeepSeekV4, "f"),
            "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kDeepSeekDsml, ""),
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kGemma, "f"), "<|tool_call>call:f{");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kGemma, ""), "<|tool_call>call:");
  struct Case {
    ToolFormat format;
    std::string named_rest;     // what the model writes after the named opening
    std::string required_rest;  // after the unnamed one: a name close to a listed one
  };
  const Case cases[] = {
      {ToolFormat::kQwenXml, "<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
       "get_weath>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"},
      {ToolFormat::kGlm, "<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>",
       "get_weath<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>"},
      {ToolFormat::kDeepSeekV4,
       "<｜DSML｜parameter name=\"city\" "
       "string=\"true\">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
       "get_weath\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>"},
      {ToolFormat::kGemma, "city:<|\"|>Oslo<|\"|>}<tool_call|>",
       "get_weath{city:<|\"|>Oslo<|\"|>}<tool_call|>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.format));
    EXPECT_TRUE(can_force_calls(c.format));
    EXPECT_FALSE(grammar_holds_arguments(c.format));
    // Generation stops at the block's end (so the parser is never handed it): the same call.
    const std::string_view end = call_block_end(c.format);
    ASSERT_NE(c.named_rest.find(end), std::string::npos);
    OutputParserOptions o = options(c.format);
    o.reasoning = false;
    o.forced_call = true;
    o.tool_names = {"get_weather", "now"};
    for (const std::string forced : {"get_weather", ""}) {
      o.forced_name = forced;
      const std::string rest = forced.empty() ? c.required_rest : c.named_rest;
      for (const std::string& text : {rest, rest.substr(0, rest.find(end))}) {
        ParsedDelta d = both(o, text);
        ASSERT_EQ(d.tool_calls.size(), 1u);
        EXPECT_EQ(d.tool_calls[0].name, "get_weather");
        EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Oslo"})");
        EXPECT_EQ(d.content, "");
      }
      // Nothing written at all: still the call.
      const ParsedDelta d = both(o, "");
      ASSERT_EQ(d.tool_calls.size(), 1u);
      EXPECT_EQ(d.tool_calls[0].name, forced.empty() ? "get_weather" : forced);
    }
  }
}

}  // namespace
}  // namespace herd::server
