// OutputParser: splits a chat model's streamed text into what OpenAI's API returns
// separately: `content`, `reasoning_content` (the text inside <think>...</think>) and
// `tool_calls` in the model family's own format:
//   Hermes / Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (repeatable)
//   Llama 3         {"name": ..., "parameters": {...}}   (the whole reply, <|python_tag|> optional)
//   Mistral         [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//                   or [TOOL_CALLS]name[ARGS]{...}
// It holds back text that may be the start of a marker, so a marker is never streamed as
// content. A tool call that does not parse is returned as content, unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace herd::server {

enum class ToolFormat { kNone, kHermes, kLlama3Json, kMistral };

// The tool-call format a chat template's source implies (kNone when it shows none).
ToolFormat detect_tool_format(std::string_view template_source);
// Whether a rendered prompt ends inside an open <think> block (the template opened it).
bool prompt_opens_reasoning(std::string_view prompt);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;  // complete calls, in order
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

struct OutputParserOptions {
  bool reasoning = false;            // split out <think>...</think>
  bool starts_in_reasoning = false;  // the prompt opened <think>
  ToolFormat tools = ToolFormat::kNone;
  std::string id_prefix = "call_";  // tool-call ids are id_prefix + index
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);
  ParsedDelta push(std::string_view text);
  ParsedDelta finish();  // end of generation: everything held
  int n_tool_calls() const { return n_tool_calls_; }

 private:
  enum class State { kContent, kReasoning, kHermesCall, kRestIsCalls };
  void drain(ParsedDelta& out, bool at_end);
  bool parse_calls(std::string_view text, ParsedDelta& out);
  void add_call(std::string name, std::string arguments, ParsedDelta& out);

  OutputParserOptions options_;
  State state_;
  std::string held_;
  std::string rest_marker_;    // the marker that started kRestIsCalls, restored if no call parses
  bool seen_content_ = false;  // some non-space content was emitted
  bool trim_next_ = false;     // drop whitespace that follows </think>
  int n_tool_calls_ = 0;
};

}  // namespace herd::server
