// Reasoning and tool-call parsing, fed whole and one character at a time: the same result
// either way, and no marker ever leaks into content.
#include "server/output_parser.h"

#include <gtest/gtest.h>

#include "server/output_parser_test_util.h"

namespace herd::server {
namespace {

using namespace parser_testing;

TEST(OutputParser, ThinkGoesToReasoning) {
  OutputParserOptions o;
  o.reasoning = true;
  const ParsedDelta d = both(o, "<think>Let me see.</think>\n\nIt is 4.");
  EXPECT_EQ(d.reasoning, "Let me see.");
  EXPECT_EQ(d.content, "It is 4.");
}

TEST(OutputParser, PromptOpenedThink) {
  OutputParserOptions o;
  o.reasoning = true;
  o.starts_in_reasoning = prompt_opens_reasoning("<|im_start|>assistant\n<think>\n");
  EXPECT_TRUE(o.starts_in_reasoning);
  EXPECT_FALSE(prompt_opens_reasoning("<think>\n\n</think>\n\n"));
  const ParsedDelta d = both(o, "hmm</think>Yes");
  EXPECT_EQ(d.reasoning, "hmm");
  EXPECT_EQ(d.content, "Yes");
}

TEST(OutputParser, UnfinishedThinkIsStillReasoning) {
  OutputParserOptions o;
  o.reasoning = true;
  const ParsedDelta d = both(o, "<think>still thinking");
  EXPECT_EQ(d.reasoning, "still thinking");
  EXPECT_EQ(d.content, "");
}

TEST(OutputParser, HermesToolCalls) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  o.id_prefix = "call_x_";
  const ParsedDelta d =
      both(o,
           "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
           "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"now\", "
           "\"arguments\": {}}</tool_call>");
  EXPECT_EQ(d.content, "I will check.\n");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(d.tool_calls[0].id, "call_x_0");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].id, "call_x_1");
}

TEST(OutputParser, BrokenHermesCallStaysContent) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  const ParsedDelta d = both(o, "<tool_call>{not json}</tool_call>", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call>{not json}</tool_call>");
}

TEST(OutputParser, Llama3JsonReply) {
  OutputParserOptions o;
  o.tools = ToolFormat::kLlama3Json;
  const ParsedDelta d =
      both(o, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(d.content, "");
  const ParsedDelta tagged = both(o, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}");
  ASSERT_EQ(tagged.tool_calls.size(), 1u);
  EXPECT_EQ(tagged.tool_calls[0].name, "f");
  // Plain text is content, JSON that is not a call too.
  EXPECT_EQ(both(o, "Hello there").content, "Hello there");
  EXPECT_EQ(both(o, "{\"x\": 1}").content, "{\"x\": 1}");
}

TEST(OutputParser, MistralToolCalls) {
  OutputParserOptions o;
  o.tools = ToolFormat::kMistral;
  const ParsedDelta d = both(o,
                             "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, "
                             "{\"name\": \"b\", \"arguments\": {}}]");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "a");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(d.tool_calls[1].name, "b");
  const ParsedDelta args = both(o, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}");
  ASSERT_EQ(args.tool_calls.size(), 1u);
  EXPECT_EQ(args.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args.tool_calls[0].arguments, "{\"city\":\"Rome\"}");
}

TEST(OutputParser, WithoutToolsMarkersAreContent) {
  OutputParserOptions o;
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(parse(o, text, false).content, text);
}

TEST(OutputParser, DetectsTheTemplatesFormat) {
  EXPECT_EQ(detect_tool_format("...<tool_call>\\n{\"name\": ..."), ToolFormat::kHermes);
  EXPECT_EQ(detect_tool_format("{{ '[TOOL_CALLS]' }}"), ToolFormat::kMistral);
  EXPECT_EQ(detect_tool_format("<|start_header_id|>ipython<|end_header_id|>"),
            ToolFormat::kLlama3Json);
  EXPECT_EQ(detect_tool_format("{{ messages }}"), ToolFormat::kNone);
}

// Streamed, a call is announced once its name is complete, then its arguments follow in
// pieces as they are generated; the pieces add up to the whole call.
TEST(OutputParser, ToolCallsStreamAsPieces) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  o.id_prefix = "call_x_";
  OutputParser p(o);
  ParsedDelta all = p.push("Checking.<tool_call>\n{\"name\": \"get_wea");
  EXPECT_TRUE(all.tool_calls.empty());
  ParsedDelta d = p.push("ther\", \"arguments\": {\"city\": ");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[0].id, "call_x_0");
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":");
  all.append(d);
  d = p.push("\"Paris, France\"");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, "");  // a later piece: arguments only
  EXPECT_EQ(d.tool_calls[0].name, "");
  EXPECT_EQ(d.tool_calls[0].arguments, "\"Paris, France\"");
  all.append(d);
  all.append(
      p.push("}}\n</tool_call><tool_call>{\"arguments\": {\"x\": [1, 2]}, \"name\": \"b\"}"));
  all.append(p.finish());
  EXPECT_EQ(all.content, "Checking.");
  ASSERT_EQ(all.tool_calls.size(), 2u);
  EXPECT_EQ(all.tool_calls[0].arguments, "{\"city\":\"Paris, France\"}");
  // Arguments before the name: the call is announced with them once the name is read.
  EXPECT_EQ(all.tool_calls[1].name, "b");
  EXPECT_EQ(all.tool_calls[1].index, 1);
  EXPECT_EQ(all.tool_calls[1].arguments, "{\"x\":[1,2]}");
  EXPECT_EQ(p.n_tool_calls(), 2);
}

TEST(OutputParser, CallArgumentsKeepTheirStringsAndStringArguments) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  // White space inside strings stays; a call without arguments gets {}; arguments written
  // as a JSON string are decoded.
  const ParsedDelta d = both(o,
                             "<tool_call>{\"name\": \"f\", \"arguments\": {\"q\": \"a  {b}\\\"\"}}"
                             "</tool_call><tool_call>{\"name\": \"g\"}</tool_call>"
                             "<tool_call>{\"name\": \"h\", \"arguments\": \"{\\\"n\\\": 1}\"}"
                             "</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 3u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"q\":\"a  {b}\\\"\"}");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  EXPECT_EQ(d.tool_calls[2].arguments, "{\"n\": 1}");
}

TEST(OutputParser, NamedCallWithBrokenArgumentsIsStillACall) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  // The name was complete (and may have been streamed): the call stands, its arguments as
  // written, cut off by the end of the block.
  const ParsedDelta d =
      both(o, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":tru");
  EXPECT_EQ(d.content, "");
}

TEST(OutputParser, RepeatedArgumentsKeyKeepsTheFirst) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  // The first arguments may have been streamed already; a stream cannot take them back.
  const ParsedDelta d = both(
      o, R"(<tool_call>{"name": "f", "arguments": {"a": 123456}, "arguments": {}}</tool_call>)");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"a":123456})");
}

TEST(OutputParser, RepeatedNameKeyKeepsTheFirst) {
  // output_parser_fuzz: a forced Mistral call whose empty name was complete (and streamed,
  // mapped to "f") was renamed by a second name key when read whole but not in pieces.
  OutputParserOptions o;
  o.tools = ToolFormat::kMistral;
  o.forced_call = true;
  o.tool_names = {"f", "get_weather"};
  const ParsedDelta d = both(o, R"(","name":"g"}])");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  o.forced_call = false;
  o.tools = ToolFormat::kHermes;
  const ParsedDelta h =
      both(o, R"(<tool_call>{"name": "get_weather", "name": "f", "arguments": {}}</tool_call>)");
  ASSERT_EQ(h.tool_calls.size(), 1u);
  EXPECT_EQ(h.tool_calls[0].name, "get_weather");
}

TEST(OutputParser, FuzzFoundRepeatedArgumentsInEveryFormat) {
  // server_request_fuzz: a repeated arguments key after part of the first had been handed
  // out made the parser cut its text at a position past its end (std::out_of_range).
  using namespace std::string_literals;  // the text holds NUL bytes
  const std::string text =
      "[TOOL[CALLS]\0\1ARGS][ZOOL[CALLS]\0\1AOL[CALLS]\0\1ARGS][ZOOL[CALLS]\0\1ARGS]"
      "{\", \"arguments\": {}}]"s;
  for (ToolFormat format :
       {ToolFormat::kHermes, ToolFormat::kLlama3Json, ToolFormat::kMistral,
        ToolFormat::kMistralArgs, ToolFormat::kDeepSeek, ToolFormat::kKimi, ToolFormat::kHarmony}) {
    for (bool forced : {false, true}) {
      OutputParserOptions o;  // as the fuzz target sets them
      o.reasoning = true;
      o.starts_in_reasoning = text.size() % 2 == 1;
      o.tools = format;
      o.forced_call = forced;
      o.forced_name = text.size() % 3 == 0 ? "f" : "";
      o.tool_names = {"f", "g"};
      OutputParser p(o);
      ParsedDelta all = p.push(text.substr(0, text.size() / 2));
      all.append(p.push(text.substr(text.size() / 2)));
      all.append(p.finish());
      if (forced) {
        EXPECT_FALSE(all.tool_calls.empty());
      }
    }
  }
}

TEST(OutputParser, MistralArgsCallsStream) {
  OutputParserOptions o;
  o.tools = ToolFormat::kMistralArgs;
  OutputParser p(o);
  ParsedDelta all = p.push("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Ro");
  ASSERT_EQ(all.tool_calls.size(), 1u);
  EXPECT_EQ(all.tool_calls[0].name, "get_weather");
  EXPECT_EQ(all.tool_calls[0].arguments, "{\"city\":\"Ro");
  // Mistral Small 3.2 writes a call id between name and arguments.
  all.append(p.push("me\"}[TOOL_CALLS]now[CALL_ID]a1b2c3d4e[ARGS]{}"));
  all.append(p.finish());
  ASSERT_EQ(all.tool_calls.size(), 2u);
  EXPECT_EQ(all.tool_calls[0].arguments, "{\"city\":\"Rome\"}");
  EXPECT_EQ(all.tool_calls[1].name, "now");
  EXPECT_EQ(all.tool_calls[1].arguments, "{}");
  EXPECT_EQ(all.content, "");
}

// The opening of a forced call per format: what the prompt ends with.
TEST(OutputParser, ForcedCallPrefixPerFormat) {
  EXPECT_EQ(forced_call_prefix(ToolFormat::kHermes, "f"),
            "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kHermes, ""), "<tool_call>\n{\"name\": \"");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kLlama3Json, "f"), "{\"name\": \"f\", \"parameters\": ");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kLlama3Json, ""), "{\"name\": \"");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kMistral, "f"),
            "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": ");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kMistralArgs, "f"), "[TOOL_CALLS]f[ARGS]");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kMistralArgs, ""), "[TOOL_CALLS]");
  // A name is written as a JSON string.
  EXPECT_EQ(forced_call_prefix(ToolFormat::kHermes, "a\"b"),
            "<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\": ");
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  EXPECT_EQ(forced_reply_opening(o), "");  // nothing forced
  o.forced_call = true;
  o.reasoning = o.starts_in_reasoning = true;
  EXPECT_EQ(forced_reply_opening(o), "</think>\n\n<tool_call>\n{\"name\": \"");
}

// A forced call: the parser starts inside it, the opening never shows as content, and the
// reply is that call whatever the model wrote after it.
TEST(OutputParser, ForcedCallStartsInsideTheCall) {
  for (ToolFormat format :
       {ToolFormat::kHermes, ToolFormat::kLlama3Json, ToolFormat::kMistral,
        ToolFormat::kMistralArgs, ToolFormat::kDeepSeek, ToolFormat::kKimi, ToolFormat::kHarmony}) {
    SCOPED_TRACE(static_cast<int>(format));
    OutputParserOptions o;
    o.tools = format;
    o.forced_call = true;
    o.forced_name = "get_weather";
    o.tool_names = {"now", "get_weather"};
    // The rest of the call, closing what the opening opened.
    const std::string close = format == ToolFormat::kMistral ? "}]"
                              : format == ToolFormat::kHermes || format == ToolFormat::kLlama3Json
                                  ? "}"
                                  : "";
    const ParsedDelta good = both(o, "{\"city\": \"Oslo\"}" + close);
    ASSERT_EQ(good.tool_calls.size(), 1u);
    EXPECT_EQ(good.tool_calls[0].name, "get_weather");
    EXPECT_EQ(good.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
    EXPECT_EQ(good.content, "");
    // Text that is no JSON: still the call, its arguments the text as written.
    const ParsedDelta junk = both(o, "hello world", false);
    ASSERT_EQ(junk.tool_calls.size(), 1u);
    EXPECT_EQ(junk.tool_calls[0].name, "get_weather");
    EXPECT_EQ(junk.tool_calls[0].arguments, "helloworld");
    EXPECT_EQ(junk.content, "");
    // Nothing at all (max_tokens reached at once).
    const ParsedDelta nothing = both(o, "");
    ASSERT_EQ(nothing.tool_calls.size(), 1u);
    EXPECT_EQ(nothing.tool_calls[0].name, "get_weather");
  }
}

// "required": the model writes the name; one that is not a tool becomes the closest tool.
TEST(OutputParser, RequiredCallNamesOneOfTheTools) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  o.forced_call = true;
  o.tool_names = {"get_weather", "get_time"};
  ParsedDelta d = both(o, "get_time\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_time");
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
  d = both(o, "get_tim\", \"arguments\": {}}");
  EXPECT_EQ(d.tool_calls.at(0).name, "get_time");
  // A name never closed: the text written so far picks the tool.
  d = both(o, "get_w");
  EXPECT_EQ(d.tool_calls.at(0).name, "get_weather");
  d = both(o, "zzz zz");
  EXPECT_EQ(d.tool_calls.at(0).name, "get_weather");  // nothing shared: the first
  EXPECT_EQ(d.content, "");
  o.tools = ToolFormat::kMistralArgs;
  d = both(o, "get_tim[ARGS]{\"a\": 1}");
  EXPECT_EQ(d.tool_calls.at(0).name, "get_time");
  EXPECT_EQ(d.tool_calls.at(0).arguments, "{\"a\":1}");
}

TEST(OutputParser, ForcedCallAfterOpenedReasoning) {
  OutputParserOptions o;
  o.tools = ToolFormat::kHermes;
  o.reasoning = o.starts_in_reasoning = true;
  o.forced_call = true;
  o.forced_name = "f";
  o.tool_names = {"f"};
  const ParsedDelta d = both(o, "{}}\n</tool_call>");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
}

// ---------------------------------------------------------------------------------------
// DeepSeek V3.1, Kimi K2 and gpt-oss (harmony)

TEST(OutputParser, DeepSeekToolCallsAfterReasoning) {
  OutputParserOptions o;
  o.tools = ToolFormat::kDeepSeek;
  o.reasoning = o.starts_in_reasoning = true;  // V3.1's thinking prompt ends with <think>
  const ParsedDelta d =
      both(o,
           "The user wants weather.</think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
           "get_weather<｜tool▁sep｜>{\"city\": \"São Paulo\"}<｜tool▁call▁end｜>\n"
           "<｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(d.reasoning, "The user wants weather.");
  EXPECT_EQ(d.content, "Checking.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"São Paulo\"}");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
}

// V3 and R1: a type before the name, the arguments in a ```json fence. A fence inside a JSON
// string is text.
TEST(OutputParser, DeepSeekR1ToolCalls) {
  OutputParserOptions o;
  o.tools = ToolFormat::kDeepSeekR1;
  o.reasoning = true;
  const ParsedDelta d =
      both(o,
           "<think>ok</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
           "get_weather\n```json\n{\"city\": \"a```b\"}\n```<｜tool▁call▁end｜>\n"
           "<｜tool▁call▁begin｜>function<｜tool▁sep｜>now\n```json\n{}\n```<｜tool▁call▁end｜>"
           "<｜tool▁calls▁end｜>");
  EXPECT_EQ(d.reasoning, "ok");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"a```b\"}");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
}

TEST(OutputParser, DeepSeekCallCutByTheEndOfTheReply) {
  OutputParserOptions o;
  o.tools = ToolFormat::kDeepSeek;
  // The end-of-sentence token stops generation before the closing markers.
  const ParsedDelta d = both(o,
                             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
                             "{\"a\": [1, 2]}");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":[1,2]}");
  EXPECT_EQ(d.content, "");
}

// DeepSeek V3.2's DSML: parameters become a JSON object; string="true" values are text.
TEST(OutputParser, DeepSeekDsmlToolCalls) {
  OutputParserOptions o;
  o.tools = ToolFormat::kDeepSeekDsml;
  o.reasoning = true;
  const ParsedDelta d =
      both(o,
           "<think>plan</think>Sure.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke "
           "name=\"get_weather\">\n"
           "<｜DSML｜parameter name=\"city\" string=\"true\">São \"Paulo\"\n</｜DSML｜parameter>\n"
           "<｜DSML｜parameter name=\"days\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
           "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n"
           "</｜DSML｜function_calls>");
  EXPECT_EQ(d.reasoning, "plan");
  EXPECT_EQ(d.content, "Sure.\n\n");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"São \"Paulo\"\n","days":[1,2]})");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  // No invoke: the block is text.
  EXPECT_EQ(both(o, "<｜DSML｜function_calls>hm", false).content, "<｜DSML｜function_calls>hm");
  // Forced by its opening alone: its parameters are not JSON a grammar holds.
  EXPECT_TRUE(can_force_calls(ToolFormat::kDeepSeekDsml));
  EXPECT_FALSE(grammar_holds_arguments(ToolFormat::kDeepSeekDsml));
}

TEST(OutputParser, KimiToolCalls) {
  OutputParserOptions o;
  o.tools = ToolFormat::kKimi;
  const ParsedDelta d =
      both(o,
           "Let me look.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
           "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"
           "<|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
           "<|tool_calls_section_end|>");
  EXPECT_EQ(d.content, "Let me look.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  // Kimi's own ids: the template heads a tool result with its call's id.
  EXPECT_EQ(d.tool_calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].id, "functions.now:1");
}

TEST(OutputParser, KimiThinking) {
  OutputParserOptions o;
  o.tools = ToolFormat::kKimi;
  o.reasoning = true;  // K2 Thinking writes <think>...</think> first
  const ParsedDelta d = both(o,
                             "<think>Need a tool.</think><|tool_calls_section_begin|>"
                             "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
                             "<|tool_call_end|><|tool_calls_section_end|>");
  EXPECT_EQ(d.reasoning, "Need a tool.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
}

TEST(OutputParser, HarmonyChannels) {
  OutputParserOptions o;
  o.harmony = true;
  const ParsedDelta d = both(o,
                             "<|channel|>analysis<|message|>2 + 2 is 4.<|end|><|start|>assistant"
                             "<|channel|>final<|message|>It is 4.<|return|>");
  EXPECT_EQ(d.reasoning, "2 + 2 is 4.");
  EXPECT_EQ(d.content, "It is 4.");
  EXPECT_TRUE(d.tool_calls.empty());
  // <|return|> is an end-of-generation token: usually the reply just stops.
  const ParsedDelta cut = both(o, "<|channel|>final<|message|>Hi");
  EXPECT_EQ(cut.content, "Hi");
  // Text that is no harmony at all (a model that ignores the format) is content.
  EXPECT_EQ(both(o, "Hello <there>", false).content, "Hello <there>");
  EXPECT_EQ(both(o, "", false).content, "");
  // output_parser_fuzz: a header just under the length bound, its <|message|> cut between
  // pieces, was taken for text when streamed.
  const std::string header = "<|channel|>final " + std::string(235, 'x');
  EXPECT_EQ(both(o, header + "<|message|>Hi").content, "Hi");
  EXPECT_EQ(both(o, header + "xxxxxxxxxx<|message|>Hi", false).content,
            header + "xxxxxxxxxx<|message|>Hi");  // too long for a header: text
}

TEST(OutputParser, HarmonyToolCalls) {
  OutputParserOptions o;
  o.harmony = true;
  o.tools = ToolFormat::kHarmony;
  o.id_prefix = "call_h_";
  // The recipient after the channel (as gpt-oss writes it) or in the role (as its template
  // writes a call), with or without <|constrain|>.
  const ParsedDelta d =
      both(o,
           "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
           "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}"
           "<|call|><|start|>assistant to=functions.now<|channel|>commentary json<|message|>{}");
  EXPECT_EQ(d.reasoning, "Need the weather.");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].id, "call_h_0");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(d.tool_calls[1].name, "now");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  // Without tools read (tool_choice "none"), a call's text is content.
  o.tools = ToolFormat::kNone;
  EXPECT_EQ(both(o, "<|channel|>commentary to=functions.f json<|message|>{}<|call|>").content,
            "{}");
}

TEST(OutputParser, HarmonyCallsStreamAsPieces) {
  OutputParserOptions o;
  o.harmony = true;
  o.tools = ToolFormat::kHarmony;
  OutputParser p(o);
  ParsedDelta all = p.push("<|channel|>analysis<|message|>hm");
  EXPECT_EQ(all.reasoning, "hm");
  ParsedDelta d = p.push("<|end|><|start|>assistant<|channel|>commentary to=functions.f");
  EXPECT_TRUE(d.tool_calls.empty());  // the name may go on
  all.append(d);
  d = p.push(" <|constrain|>json<|message|>{\"q\": ");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"q\":");
  all.append(d);
  d = p.push("\"x y\"}");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "");
  EXPECT_EQ(d.tool_calls[0].arguments, "\"x y\"}");
  all.append(d);
  all.append(p.finish());
  ASSERT_EQ(all.tool_calls.size(), 1u);
  EXPECT_EQ(all.tool_calls[0].arguments, "{\"q\":\"x y\"}");
  EXPECT_EQ(p.n_tool_calls(), 1);
}

// Broken text in each new format: content (or a call whose name was complete), never a crash.
TEST(OutputParser, MalformedNewFormatsAreContent) {
  OutputParserOptions o;
  o.tools = ToolFormat::kDeepSeek;
  ParsedDelta d = both(o, "<｜tool▁calls▁begin｜>no call here", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<｜tool▁calls▁begin｜>no call here");
  d = both(o, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f no sep<｜tool▁calls▁end｜>after",
           false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f no sep<｜tool▁calls▁end｜>after");
  o.tools = ToolFormat::kKimi;
  d = both(o, "<|tool_calls_section_begin|>oops<|tool_calls_section_end|> ok", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<|tool_calls_section_begin|>oops<|tool_calls_section_end|> ok");
  o.tools = ToolFormat::kHarmony;
  o.harmony = true;
  d = both(o, "<|channel|>final no message marker\nat all", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<|channel|>final no message marker\nat all");
  d = both(o, "<|channel|>commentary to=functions.f<|message|>{\"a\": tru", false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":tru");  // as written, as for other formats
}

TEST(OutputParser, ForcedOpeningsOfTheNewFormats) {
  EXPECT_EQ(forced_call_prefix(ToolFormat::kDeepSeek, "f"),
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kDeepSeek, ""),
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kKimi, "f"),
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
            "<|tool_call_argument_begin|>");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kKimi, ""),
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kHarmony, "f"),
            " to=functions.f<|channel|>commentary json<|message|>");
  EXPECT_EQ(forced_call_prefix(ToolFormat::kHarmony, ""), " to=functions.");
  // "required": the model writes the name, and the rest of the opening.
  for (ToolFormat format :
       {ToolFormat::kDeepSeek, ToolFormat::kDeepSeekR1, ToolFormat::kKimi, ToolFormat::kHarmony}) {
    SCOPED_TRACE(static_cast<int>(format));
    OutputParserOptions o;
    o.tools = format;
    o.harmony = format == ToolFormat::kHarmony;
    o.forced_call = true;
    o.tool_names = {"get_weather", "get_time"};
    const std::string rest =
        forced_call_prefix(format, "get_tim").substr(forced_call_prefix(format, "").size());
    ParsedDelta d = both(o, rest + "{\"a\": 1}");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "get_time");
    EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":1}");
    EXPECT_EQ(d.content, "");
    // The name cut short: the tool it begins.
    d = both(o, "get_w");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "get_weather");
    EXPECT_EQ(d.content, "");
  }
}

}  // namespace
}  // namespace herd::server
