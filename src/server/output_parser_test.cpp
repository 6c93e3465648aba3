// Reasoning and tool-call parsing, fed whole and one character at a time: the same result
// either way, and no marker ever leaks into content.
#include "server/output_parser.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

void append(ParsedDelta& all, const ParsedDelta& d) {
  all.content += d.content;
  all.reasoning += d.reasoning;
  all.tool_calls.insert(all.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
}

ParsedDelta parse(const OutputParserOptions& o, const std::string& text, bool by_char,
                  bool check_leaks = true) {
  OutputParser p(o);
  ParsedDelta all;
  if (by_char) {
    for (char c : text) {
      ParsedDelta d = p.push(std::string(1, c));
      // Nothing that could start a marker is handed out as content before it completes.
      if (check_leaks) {
        EXPECT_EQ(d.content.find('<'), std::string::npos) << text;
        EXPECT_EQ(d.content.find('['), std::string::npos) << text;
      }
      append(all, d);
    }
  } else {
    append(all, p.push(text));
  }
  append(all, p.finish());
  return all;
}

// Parses both ways and checks they agree.
ParsedDelta both(const OutputParserOptions& o, const std::string& text, bool check_leaks = true) {
  const ParsedDelta whole = parse(o, text, false);
  const ParsedDelta chars = parse(o, text, true, check_leaks);
  EXPECT_EQ(whole.content, chars.content);
  EXPECT_EQ(whole.reasoning, chars.reasoning);
  EXPECT_EQ(whole.tool_calls.size(), chars.tool_calls.size());
  return whole;
}

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

}  // namespace
}  // namespace herd::server
