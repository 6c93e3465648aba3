// OutputParser: splits a chat model's streamed text into what OpenAI's API returns
// separately: `content`, `reasoning_content` (the text inside <think>...</think>, or Gemma 4's
// <|channel>thought...<channel|>) and
// `tool_calls` in the model family's own format:
//   Hermes / Qwen   <tool_call>{"name": ..., "arguments": {...}}</tool_call>   (repeatable)
//   Llama 3         {"name": ..., "parameters": {...}}   (the whole reply, <|python_tag|> optional)
//   Mistral         [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//                   or [TOOL_CALLS]name[ARGS]{...}
//   DeepSeek V3.1
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
//                   ...<｜tool▁calls▁end｜>
//   DeepSeek V3.2   <｜DSML｜function_calls><｜DSML｜invoke name="name"><｜DSML｜parameter ...
//                   (dsml_reader.h); DeepSeek V4 the same in <｜DSML｜tool_calls>
//   Qwen3-Coder, Qwen3.5 / 3.6
//                   <tool_call><function=name><parameter=k>v</parameter></function></tool_call>
//                   (xml_call_reader.h)
//   GLM-4.5 to GLM-5
//                   <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>
//                   (glm_call_reader.h)
//   Gemma 4         <|tool_call>call:name{k:<|"|>v<|"|>}<tool_call|>   (gemma_call_reader.h)
//   Kimi K2         <|tool_calls_section_begin|><|tool_call_begin|>functions.name:0
//                   <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
//   gpt-oss         harmony messages (harmony_parser.h): <|channel|>analysis<|message|>... is
//                   reasoning, <|channel|>final<|message|>... content, and a message
//                   to=functions.name is a call whose text is its arguments
// It holds back text that may be the start of a marker, so a marker is never streamed as
// content.
//
// Tool calls stream as pieces, as OpenAI streams them: a call's first piece carries its
// index, id and name as soon as the name is complete; later pieces carry more of its
// arguments text as it is generated. The arguments are the model's JSON text with the
// whitespace outside strings removed (so a call reads the same streamed or not, and a
// well-formed object comes out compact); when they are not valid JSON they are returned as
// written, which clients must check anyway (`arguments` is a string in OpenAI's API). The
// formats whose values are text (DSML, Qwen's XML, GLM's, Gemma 4's) are made JSON objects
// as they are read (argument_types.h types XML's and GLM's values by the tools' schemas). A
// call block in which no name is ever complete is returned as content, unchanged.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace herd::server {

class HarmonyParser;
struct ParameterTypes;

// kMistral writes calls as a JSON array after [TOOL_CALLS]; kMistralArgs (v11 templates and
// later) as [TOOL_CALLS]name[ARGS]{...}; kMistralCallId (Mistral Small 3.2) as
// [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}, where the template refuses any id that is not 9
// letters and digits. The parser reads all three forms for any of them. kDeepSeek is
// DeepSeek V3.1's <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}, kDeepSeekR1 V3's and R1's
// <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```, kDeepSeekDsml DeepSeek
// V3.2's DSML markup (dsml_reader.h) and kDeepSeekV4 V4's (the same markup in a
// <｜DSML｜tool_calls> block), kKimi Kimi K2's functions.name:index ids, kHarmony gpt-oss's
// messages to=functions.name, kQwenXml Qwen3-Coder's and Qwen3.5's XML, kGlm GLM's
// <arg_key>/<arg_value> pairs, kGemma Gemma 4's <|tool_call>call:name{...}.
enum class ToolFormat {
  kNone,
  kHermes,
  kLlama3Json,
  kMistral,
  kMistralArgs,
  kMistralCallId,
  kDeepSeek,
  kDeepSeekR1,
  kDeepSeekDsml,
  kKimi,
  kHarmony,
  kDeepSeekV4,
  kQwenXml,
  kGlm,
  kGemma,
};

// The tool-call format a chat template's source implies (kNone when it shows none, or shows
// one this parser does not read).
ToolFormat detect_tool_format(std::string_view template_source);
// What opens and closes a reply's reasoning.
struct ReasoningMarkers {
  std::string_view open = "<think>";
  std::string_view close = "</think>";
};
// The reasoning markers a chat template writes (Gemma 4's channel, else <think>), or nothing
// when it shows none.
std::optional<ReasoningMarkers> reasoning_markers(std::string_view template_source);
// Whether a rendered prompt ends inside an open reasoning block (the template opened it).
bool prompt_opens_reasoning(std::string_view prompt, const ReasoningMarkers& markers = {});
struct OutputParserOptions;
// Sets options.reasoning, reasoning_markers and starts_in_reasoning as a chat template and the
// prompt it rendered imply.
void set_reasoning(OutputParserOptions& options, std::string_view template_source,
                   std::string_view prompt);
// Whether a chat template writes OpenAI's harmony format (gpt-oss): every reply is a series of
// messages on channels, tools or not.
bool uses_harmony(std::string_view template_source);

// Whether a call in `format` can be forced (tool_choice "required" or a named function):
// every format that has calls. The call's opening is written at the end of the prompt and
// the parser starts inside it, so the reply holds that call (of a listed name) whatever
// follows.
bool can_force_calls(ToolFormat format);
// Whether a forced call's arguments are also held to its parameters by a grammar
// (tool_call_grammar.h): the formats whose arguments are JSON. The others' (DSML, Qwen's XML,
// GLM's, Gemma 4's) are the model's own, made a JSON object as they are read.
bool grammar_holds_arguments(ToolFormat format);
// What closes a call block in a format whose arguments no grammar holds (kQwenXml's and
// kGlm's </tool_call>, DSML's block end, Gemma 4's <tool_call|>): a forced call's generation
// stops there, so that the call is the whole reply, as where a grammar ends it.
// REQUIRES: can_force_calls(format) && !grammar_holds_arguments(format).
std::string_view call_block_end(ToolFormat format);

// The opening of a tool call in `format`, appended to a rendered prompt so that generation
// continues inside a call (tool_choice "required" or a named function): up to the opening
// quote of the name when `name` is empty, else up to where the arguments value begins.
// call_id: the call's id, for formats that write one (kMistralCallId).
// REQUIRES: can_force_calls(format).
std::string forced_call_prefix(ToolFormat format, std::string_view name,
                               std::string_view call_id = {});

// A piece of a tool call (see above): id and name are set on the first piece of a call only.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // the next text of the arguments
  int index = 0;          // which call of the reply, from 0
};

struct ParsedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;  // pieces, in order
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  // Adds `more` after this: text is appended, and a piece of a call already here extends
  // that call's arguments (so appending every delta of a reply gives its whole calls).
  void append(const ParsedDelta& more);
};

struct OutputParserOptions {
  bool reasoning = false;  // split out <think>...</think> (reasoning_markers)
  ReasoningMarkers reasoning_markers;
  bool harmony = false;              // the reply is harmony messages (uses_harmony)
  bool starts_in_reasoning = false;  // the prompt opened <think>
  ToolFormat tools = ToolFormat::kNone;
  std::string id_prefix = "call_";  // tool-call ids: see tool_call_id()
  // The prompt ends with forced_call_prefix(tools, forced_name): the parser starts inside
  // that call, and the reply holds at least that call even when its text is broken.
  bool forced_call = false;
  std::string forced_name;  // empty: the model writes the name
  // When not empty, every call's name is one of these: a name the model wrote that is not
  // here becomes the listed name sharing the longest prefix with it (the first on a tie).
  std::vector<std::string> tool_names;
  // The request's parameter types (parameter_types()), which type the values of the formats
  // that write them as text (kQwenXml, kGlm); null: values typed by their text alone.
  std::shared_ptr<const ParameterTypes> parameter_types;
};

// The id of the reply's call `index`: id_prefix + index, or for kMistralCallId 9 letters
// and digits derived from them (the template refuses other ids when the client sends the
// call back), or for kKimi functions.name:index, the id Kimi K2's template and training
// give a call (its tool results are headed "## Return of <id>").
std::string tool_call_id(const OutputParserOptions& options, int index, std::string_view name = {});

// What a prompt must end with for a parser with these options: the forced call's opening
// (after closing a <think> block the prompt opened), or nothing when no call is forced.
std::string forced_reply_opening(const OutputParserOptions& options);

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);
  ~OutputParser();
  OutputParser(OutputParser&&) noexcept;
  OutputParser& operator=(OutputParser&&) noexcept;
  ParsedDelta push(std::string_view text);
  ParsedDelta finish();  // end of generation: everything held
  int n_tool_calls() const;

 private:
  enum class State { kContent, kReasoning, kCallBlock };
  struct CallBlock;
  void drain(ParsedDelta& out, bool at_end);
  void feed_block(std::string_view text, ParsedDelta& out);
  bool close_block(ParsedDelta& out);  // whether the block held a call
  void emit_calls(ParsedDelta& out, bool at_end);

  OutputParserOptions options_;
  State state_;
  std::string held_;
  std::unique_ptr<CallBlock> block_;  // the call block being read (kCallBlock)
  ParsedDelta pending_;               // what the forced prefix produced, handed out first
  bool seen_content_ = false;         // some non-space content was emitted
  bool trim_next_ = false;            // drop whitespace that follows </think>
  bool opened_block_ = false;         // a call block was opened (the forced one is the first)
  int n_tool_calls_ = 0;
  std::unique_ptr<HarmonyParser> harmony_;  // reads the whole reply when options_.harmony
};

}  // namespace herd::server
