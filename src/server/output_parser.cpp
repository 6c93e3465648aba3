#include "server/output_parser.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/argument_types.h"
#include "server/dsml_reader.h"
#include "server/gemma_call_reader.h"
#include "server/glm_call_reader.h"
#include "server/harmony_parser.h"
#include "server/json_call_reader.h"
#include "server/parser_text.h"
#include "server/xml_call_reader.h"

namespace herd::server {
namespace {

// Gemma 4 thinks in a channel of its own.
constexpr ReasoningMarkers kGemmaThought{"<|channel>thought", "<channel|>"};
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kDeepSeekCalls = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekCall = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kKimiCalls = "<|tool_calls_section_begin|>";
constexpr std::string_view kKimiCallsEnd = "<|tool_calls_section_end|>";
constexpr std::string_view kKimiCall = "<|tool_call_begin|>";
constexpr std::string_view kKimiArgs = "<|tool_call_argument_begin|>";
constexpr std::string_view kKimiCallEnd = "<|tool_call_end|>";
// Kimi K2 names a call functions.NAME:INDEX.
constexpr std::string_view kKimiNamespace = "functions.";

// How a family marks the calls of a call block whose calls are a name, then arguments.
struct CallSyntax {
  std::string_view open;      // before each call's name; empty: the block's marker opened it
  std::string_view name_end;  // between the name and the arguments
  std::string_view close;     // after the arguments; empty: `next` (or the block's end) ends them
  std::string_view next;      // starts the next call, ending the arguments of this one
  bool kimi_ids = false;      // the name is written as functions.NAME:INDEX
  // When set, the name is what follows its last occurrence (R1 writes type<｜tool▁sep｜>name).
  std::string_view name_after = {};
};
constexpr CallSyntax kMistralSyntax{"", kMistralArgs, "", kMistralCalls};
constexpr CallSyntax kDeepSeekSyntax{kDeepSeekCall, kDeepSeekSep, kDeepSeekCallEnd, kDeepSeekCall};
constexpr CallSyntax kKimiSyntax{kKimiCall, kKimiArgs, kKimiCallEnd, kKimiCall, true};
// DeepSeek V3 and R1: <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```
// <｜tool▁call▁end｜>. The fence ends the arguments only after a newline, which a JSON string
// cannot hold (a ``` inside one is text).
constexpr std::string_view kFenceOpen = "```json";
constexpr CallSyntax kDeepSeekR1Syntax{kDeepSeekCall, kFenceOpen, "\n```",
                                       kDeepSeekCall, false,      kDeepSeekSep};

// Reads calls written as a name and then arguments between markers (CallSyntax) while they
// stream: Mistral's name[ARGS]{...}, [TOOL_CALLS] between them; DeepSeek's and Kimi's
// <open>name<sep>{...}<close>, repeated. Text between calls is ignored.
class NameArgsReader {
 public:
  explicit NameArgsReader(const CallSyntax& syntax)
      : syntax_(&syntax), state_(syntax.open.empty() ? State::kName : State::kBefore) {}

  void feed(std::string_view text, bool at_end) {
    buffer_ += text;
    const CallSyntax& x = *syntax_;
    for (;;) {
      if (state_ == State::kBefore) {
        const size_t open = buffer_.find(x.open);
        if (open == std::string::npos) {
          buffer_.erase(0, buffer_.size() - partial_marker(buffer_, x.open));
          return;
        }
        buffer_.erase(0, open + x.open.size());
        state_ = State::kName;
        continue;
      }
      if (state_ == State::kName) {
        const size_t end = buffer_.find(x.name_end);
        if (end == std::string::npos) return;
        ReadCall call;
        call.name = clean_name(std::string_view(buffer_).substr(0, end));
        call.named = !call.name.empty();
        call.has_arguments = true;
        calls_.push_back(std::move(call));
        buffer_.erase(0, end + x.name_end.size());
        state_ = State::kArguments;
        in_string_ = escape_ = false;
        continue;
      }
      // The arguments run to the call's close, or to the next call's opening.
      const size_t close = x.close.empty() ? std::string::npos : buffer_.find(x.close);
      const size_t next = buffer_.find(x.next);
      const size_t end = std::min(close, next);
      const size_t keep =
          at_end ? 0 : std::max(partial_marker(buffer_, x.close), partial_marker(buffer_, x.next));
      const size_t take = end != std::string::npos ? end : buffer_.size() - keep;
      for (size_t i = 0; i < take; ++i) add(buffer_[i]);
      if (end == std::string::npos) {
        buffer_.erase(0, take);
        return;
      }
      calls_.back().done = true;
      if (end == next) {
        buffer_.erase(0, next + x.next.size());
        state_ = State::kName;
      } else {
        buffer_.erase(0, close + x.close.size());
        state_ = x.open.empty() ? State::kName : State::kBefore;
      }
    }
  }
  std::vector<ReadCall>& calls() { return calls_; }
  std::string partial_name() const {
    if (state_ != State::kName) return "";
    std::string_view head = after_type(buffer_);
    return clean_name(head.substr(0, head.find_first_of("[<`")));
  }

 private:
  enum class State { kBefore, kName, kArguments };

  // What follows the call's type, when the syntax writes one before the name.
  std::string_view after_type(std::string_view head) const {
    const size_t at =
        syntax_->name_after.empty() ? std::string_view::npos : head.rfind(syntax_->name_after);
    return at == std::string_view::npos ? head : head.substr(at + syntax_->name_after.size());
  }

  // The function's name in what was written before the arguments.
  std::string clean_name(std::string_view head) const {
    head = after_type(head);
    // Some templates write name[CALL_ID]id[ARGS]: the id is the model's, not kept.
    head = trim(head.substr(0, head.find(kMistralCallId)));
    if (syntax_->kimi_ids) {
      if (head.starts_with(kKimiNamespace)) head.remove_prefix(kKimiNamespace.size());
      const size_t colon = head.rfind(':');
      if (colon != std::string_view::npos &&
          head.find_first_not_of("0123456789", colon + 1) == std::string_view::npos) {
        head = head.substr(0, colon);
      }
    }
    return std::string(head);
  }

  void add(char c) {
    if (in_string_ || !is_space(c)) calls_.back().arguments += c;
    if (!in_string_) {
      in_string_ = c == '"';
    } else if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
    }
  }

  const CallSyntax* syntax_;
  State state_;
  std::vector<ReadCall> calls_;
  std::string buffer_;
  bool in_string_ = false, escape_ = false;
};

}  // namespace

// One tool-call block: from its marker to its closing marker, or to the end of the reply.
struct OutputParser::CallBlock {
  using Reader = std::variant<JsonCallReader, NameArgsReader, DsmlReader, XmlCallReader,
                              GlmCallReader, GemmaCallReader>;
  std::string marker;      // what opened it, restored with the text when it holds no call
  std::string_view close;  // empty: the block runs to the end of the reply
  std::string raw;         // its text so far
  bool closed = false;     // its closing marker was read
  bool forced = false;     // the forced call's block: it holds a call whatever is written
  bool decided = false;    // the reader is chosen (else the block's first character chooses)
  bool mistral = false;    // [TOOL_CALLS] opened it: name[ARGS] is possible
  Reader reader;
  struct Sent {
    int index = -1;  // the call's index in the reply once announced
    size_t arguments = 0;
    bool done = false;
  };
  std::vector<Sent> sent;  // per call read

  std::vector<ReadCall>& calls() {
    return std::visit([](auto& r) -> std::vector<ReadCall>& { return r.calls(); }, reader);
  }
  std::string partial_name() const {
    return std::visit([](const auto& r) { return r.partial_name(); }, reader);
  }
  void feed(std::string_view text, bool at_end) {
    std::visit(
        [&](auto& r) {
          if constexpr (std::is_same_v<std::decay_t<decltype(r)>, JsonCallReader>) {
            r.feed(text);  // reads to the end of what it is given anyway
          } else {
            r.feed(text, at_end);
          }
        },
        reader);
  }
};

ToolFormat detect_tool_format(std::string_view source) {
  auto has = [&](std::string_view text) { return source.find(text) != std::string_view::npos; };
  // Qwen3-Coder, Qwen3.5 and Nemotron 3 write <tool_call><function=name><parameter=...>.
  // Other <function=...> formats (Seed-OSS's <seed:tool_call>, Functionary's JSON in
  // <function=name>) are not read.
  if (has(kXmlFunction)) {
    return has(kHermesOpen) && has("<parameter=") ? ToolFormat::kQwenXml : ToolFormat::kNone;
  }
  if (has(kGlmArgKey)) return ToolFormat::kGlm;
  if (has(std::string(kGemmaCall) + "call:")) return ToolFormat::kGemma;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolFormat::kHermes;
  if (source.find(kMistralCalls) != std::string_view::npos) {
    if (source.find(kMistralArgs) == std::string_view::npos) return ToolFormat::kMistral;
    return source.find(kMistralCallId) != std::string_view::npos ? ToolFormat::kMistralCallId
                                                                 : ToolFormat::kMistralArgs;
  }
  if (source.find("ipython") != std::string_view::npos ||
      source.find(kPythonTag) != std::string_view::npos) {
    return ToolFormat::kLlama3Json;
  }
  // DeepSeek V3.2 names DSML's block function_calls, V4 tool_calls.
  if (has("｜DSML｜")) {
    return has("function_calls") ? ToolFormat::kDeepSeekDsml : ToolFormat::kDeepSeekV4;
  }
  // DeepSeek V3 and R1 write a call as type<｜tool▁sep｜>name and ```json arguments.
  if (source.find(kDeepSeekCalls) != std::string_view::npos) {
    return source.find(kFenceOpen) == std::string_view::npos ? ToolFormat::kDeepSeek
                                                             : ToolFormat::kDeepSeekR1;
  }
  if (source.find(kKimiCalls) != std::string_view::npos) return ToolFormat::kKimi;
  if (uses_harmony(source)) return ToolFormat::kHarmony;
  return ToolFormat::kNone;
}

bool can_force_calls(ToolFormat format) {
  return format != ToolFormat::kNone;
}

bool grammar_holds_arguments(ToolFormat format) {
  switch (format) {
    case ToolFormat::kNone:
    case ToolFormat::kDeepSeekDsml:
    case ToolFormat::kDeepSeekV4:
    case ToolFormat::kQwenXml:
    case ToolFormat::kGlm:
    case ToolFormat::kGemma:
      return false;
    default:
      return true;
  }
}

std::string_view call_block_end(ToolFormat format) {
  switch (format) {
    case ToolFormat::kDeepSeekDsml:
      return kDsmlCallsEnd;
    case ToolFormat::kDeepSeekV4:
      return kDsmlToolCallsEnd;
    case ToolFormat::kGemma:
      return kGemmaCallEnd;
    default:
      return kHermesClose;
  }
}

bool uses_harmony(std::string_view source) {
  return source.find("<|channel|>") != std::string_view::npos &&
         source.find("<|message|>") != std::string_view::npos;
}

std::optional<ReasoningMarkers> reasoning_markers(std::string_view source) {
  if (source.find(kGemmaThought.open) != std::string_view::npos) return kGemmaThought;
  const ReasoningMarkers think;
  if (source.find(think.open) != std::string_view::npos) return think;
  return std::nullopt;
}

bool prompt_opens_reasoning(std::string_view prompt, const ReasoningMarkers& markers) {
  const size_t open = prompt.rfind(markers.open);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(markers.close);
  return close == std::string_view::npos || close < open;
}

void set_reasoning(OutputParserOptions& o, std::string_view source, std::string_view prompt) {
  const std::optional<ReasoningMarkers> markers = reasoning_markers(source);
  o.reasoning = markers.has_value();
  o.reasoning_markers = markers.value_or(ReasoningMarkers{});
  o.starts_in_reasoning = o.reasoning && prompt_opens_reasoning(prompt, o.reasoning_markers);
}

// The openings are written as each family's template writes a call into the history, so
// that the model continues a text it has been shown.
std::string forced_call_prefix(ToolFormat format, std::string_view name, std::string_view call_id) {
  const std::string quoted = nlohmann::json(std::string(name)).dump();
  auto json_call = [&](std::string_view arguments_key) {
    if (name.empty()) return std::string(R"({"name": ")");
    return R"({"name": )" + quoted + ", \"" + std::string(arguments_key) + "\": ";
  };
  switch (format) {
    case ToolFormat::kHermes:
      return std::string(kHermesOpen) + "\n" + json_call("arguments");
    case ToolFormat::kLlama3Json:
      return json_call("parameters");
    case ToolFormat::kMistral:
      return std::string(kMistralCalls) + "[" + json_call("arguments");
    case ToolFormat::kMistralArgs:
      return std::string(kMistralCalls) +
             (name.empty() ? "" : std::string(name) + std::string(kMistralArgs));
    case ToolFormat::kMistralCallId:
      return std::string(kMistralCalls) +
             (name.empty() ? ""
                           : std::string(name) + std::string(kMistralCallId) +
                                 std::string(call_id) + std::string(kMistralArgs));
    case ToolFormat::kDeepSeek:
      return std::string(kDeepSeekCalls) + std::string(kDeepSeekCall) +
             (name.empty() ? "" : std::string(name) + std::string(kDeepSeekSep));
    case ToolFormat::kDeepSeekR1:
      // The type is always "function" (the template writes tool['type']).
      return std::string(kDeepSeekCalls) + std::string(kDeepSeekCall) + "function" +
             std::string(kDeepSeekSep) +
             (name.empty() ? "" : std::string(name) + "\n" + std::string(kFenceOpen) + "\n");
    case ToolFormat::kKimi:
      // The index is the call's in the reply: the forced call is the first.
      return std::string(kKimiCalls) + std::string(kKimiCall) + std::string(kKimiNamespace) +
             (name.empty() ? "" : std::string(name) + ":0" + std::string(kKimiArgs));
    case ToolFormat::kHarmony:
      // After the generation prompt's "<|start|>assistant", as the template writes a call.
      return " to=functions." +
             (name.empty() ? "" : std::string(name) + "<|channel|>commentary json<|message|>");
    case ToolFormat::kDeepSeekDsml:
    case ToolFormat::kDeepSeekV4:
      return std::string(format == ToolFormat::kDeepSeekV4 ? kDsmlToolCalls : kDsmlCalls) +
             "\n<｜DSML｜invoke name=\"" + (name.empty() ? "" : std::string(name) + "\">\n");
    case ToolFormat::kQwenXml:
      return std::string(kHermesOpen) + "\n" + std::string(kXmlFunction) +
             (name.empty() ? "" : std::string(name) + ">\n");
    case ToolFormat::kGlm:
      return std::string(kHermesOpen) + std::string(name);
    case ToolFormat::kGemma:
      return std::string(kGemmaCall) + "call:" + (name.empty() ? "" : std::string(name) + "{");
    case ToolFormat::kNone:
      break;
  }
  return {};
}

std::string forced_reply_opening(const OutputParserOptions& o) {
  if (!o.forced_call || !can_force_calls(o.tools)) return {};
  // A forced call skips the reasoning a template opened.
  const std::string think_close =
      o.reasoning && o.starts_in_reasoning ? std::string(o.reasoning_markers.close) + "\n\n" : "";
  return think_close + forced_call_prefix(o.tools, o.forced_name, tool_call_id(o, 0));
}

std::string tool_call_id(const OutputParserOptions& o, int index, std::string_view name) {
  if (o.tools == ToolFormat::kKimi) {
    return std::string(kKimiNamespace) + std::string(name) + ":" + std::to_string(index);
  }
  const std::string id = o.id_prefix + std::to_string(index);
  if (o.tools != ToolFormat::kMistralCallId) return id;
  // FNV-1a of the usual id, as nine base-62 digits.
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : id) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  constexpr std::string_view kDigits =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string out(9, '0');
  for (char& c : out) {
    c = kDigits[hash % kDigits.size()];
    hash /= kDigits.size();
  }
  return out;
}

void ParsedDelta::append(const ParsedDelta& more) {
  content += more.content;
  reasoning += more.reasoning;
  for (const ToolCall& piece : more.tool_calls) {
    auto same = std::find_if(tool_calls.begin(), tool_calls.end(),
                             [&](const ToolCall& c) { return c.index == piece.index; });
    if (same == tool_calls.end()) {
      tool_calls.push_back(piece);
    } else {
      same->arguments += piece.arguments;
    }
  }
}

OutputParser::OutputParser(OutputParserOptions options)
    : options_(std::move(options)),
      state_(options_.reasoning && options_.starts_in_reasoning ? State::kReasoning
                                                                : State::kContent) {
  if (options_.harmony || options_.tools == ToolFormat::kHarmony) {
    harmony_ = std::make_unique<HarmonyParser>(options_);
    pending_ = harmony_->push(forced_reply_opening(options_), false);
    return;
  }
  // The prompt ends with the call's opening: read it as if the model had written it.
  held_ = forced_reply_opening(options_);
  if (!held_.empty()) drain(pending_, false);
}

int OutputParser::n_tool_calls() const {
  return harmony_ ? harmony_->n_tool_calls() : n_tool_calls_;
}

OutputParser::~OutputParser() = default;
OutputParser::OutputParser(OutputParser&&) noexcept = default;
OutputParser& OutputParser::operator=(OutputParser&&) noexcept = default;

ParsedDelta OutputParser::push(std::string_view text) {
  ParsedDelta out = std::move(pending_);
  pending_ = {};
  if (harmony_) {
    out.append(harmony_->push(text, false));
    return out;
  }
  held_ += text;
  drain(out, false);
  return out;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta out = std::move(pending_);
  pending_ = {};
  if (harmony_) {
    out.append(harmony_->push("", true));
    return out;
  }
  drain(out, true);
  return out;
}

void OutputParser::feed_block(std::string_view text, ParsedDelta& out) {
  CallBlock& b = *block_;
  b.raw += text;
  if (!b.decided) {
    // The first character decides: JSON, or the family's own markup (a Mistral call's bare
    // name, Qwen's <function=, GLM's name).
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return;
    const char c = text[first];
    if (c != '{' && c != '[') {
      if (b.mistral) {
        b.reader.emplace<NameArgsReader>(kMistralSyntax);
      } else if (options_.tools == ToolFormat::kQwenXml) {
        b.reader.emplace<XmlCallReader>(options_.parameter_types);
      } else if (options_.tools == ToolFormat::kGlm) {
        b.reader.emplace<GlmCallReader>(options_.parameter_types);
      }
    }
    b.decided = true;
    text = std::string_view(b.raw);  // what came before was white space
  }
  b.feed(text, false);
  emit_calls(out, false);
}

// Announces the calls whose names are complete and hands out the arguments text read since
// the last time; at the end of the block, whatever each call still owes.
void OutputParser::emit_calls(ParsedDelta& out, bool at_end) {
  CallBlock& b = *block_;
  std::vector<ReadCall>& calls = b.calls();
  auto add_piece = [&](ToolCall piece) {
    if (!out.tool_calls.empty() && out.tool_calls.back().index == piece.index) {
      out.tool_calls.back().arguments += piece.arguments;
    } else {
      out.tool_calls.push_back(std::move(piece));
    }
  };
  if (at_end && b.forced && calls.empty()) {
    // A forced call whose text never got as far as a call (Mistral's name cut short).
    calls.emplace_back();
  }
  b.sent.resize(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    ReadCall& call = calls[i];
    CallBlock::Sent& sent = b.sent[i];
    if (sent.done) continue;
    if (sent.index < 0) {
      const bool forced_first = at_end && b.forced && i == 0;
      if (!call.named && !forced_first) continue;
      ToolCall piece;
      sent.index = n_tool_calls_++;
      piece.index = sent.index;
      // A named forced call is that function's, whatever the model adds to its name where
      // the opening leaves the name open (GLM's ends with it).
      piece.name =
          b.forced && i == 0 && !options_.forced_name.empty()
              ? options_.forced_name
              : closest_name(call.named ? call.name : b.partial_name(), options_.tool_names);
      piece.id = tool_call_id(options_, sent.index, piece.name);
      add_piece(std::move(piece));
    }
    const bool done = at_end || call.done;
    ToolCall more;
    more.index = sent.index;
    if (!call.arguments_string) {
      // Arguments only grow (readers never take text back); min() keeps a slip harmless.
      more.arguments = call.arguments.substr(std::min(sent.arguments, call.arguments.size()));
      sent.arguments = std::max(sent.arguments, call.arguments.size());
      if (done && !call.has_arguments) more.arguments = "{}";
    } else if (done) {
      more.arguments = decode_string(call.arguments);
    }
    if (!more.arguments.empty()) add_piece(std::move(more));
    sent.done = done;
  }
}

bool OutputParser::close_block(ParsedDelta& out) {
  block_->feed("", true);
  emit_calls(out, true);
  const bool any = std::any_of(block_->sent.begin(), block_->sent.end(),
                               [](const CallBlock::Sent& s) { return s.index >= 0; });
  if (!any) {
    // No call in it: the block was text after all.
    std::string text = block_->marker + block_->raw;
    if (block_->closed) text += block_->close;
    if (!trim(text).empty()) seen_content_ = true;
    out.content += text;
  }
  block_.reset();
  return any;
}

void OutputParser::drain(ParsedDelta& out, bool at_end) {
  auto emit_content = [&](std::string_view text) {
    if (std::any_of(text.begin(), text.end(), [](char c) { return !is_space(c); })) {
      seen_content_ = true;
    }
    out.content += text;
  };
  auto open_block = [&](std::string_view marker) {
    block_ = std::make_unique<CallBlock>();
    block_->marker = std::string(marker);
    block_->close = marker == kHermesOpen      ? kHermesClose
                    : marker == kDeepSeekCalls ? kDeepSeekCallsEnd
                    : marker == kKimiCalls     ? kKimiCallsEnd
                    : marker == kDsmlCalls     ? kDsmlCallsEnd
                    : marker == kDsmlToolCalls ? kDsmlToolCallsEnd
                    : marker == kGemmaCall     ? kGemmaCallEnd
                                               : std::string_view();
    block_->mistral = marker == kMistralCalls;
    // DeepSeek's, Kimi's and Gemma 4's blocks hold their own markup only.
    block_->decided = true;
    if (marker == kDsmlCalls || marker == kDsmlToolCalls) {
      block_->reader.emplace<DsmlReader>();
    } else if (marker == kGemmaCall) {
      block_->reader.emplace<GemmaCallReader>();
    } else if (marker == kDeepSeekCalls || marker == kKimiCalls) {
      block_->reader.emplace<NameArgsReader>(marker == kKimiCalls ? kKimiSyntax
                                             : options_.tools == ToolFormat::kDeepSeekR1
                                                 ? kDeepSeekR1Syntax
                                                 : kDeepSeekSyntax);
    } else {
      block_->decided = false;
    }
    block_->forced = options_.forced_call && n_tool_calls_ == 0 && !opened_block_;
    opened_block_ = true;
    state_ = State::kCallBlock;
  };
  const bool mistral = options_.tools == ToolFormat::kMistral ||
                       options_.tools == ToolFormat::kMistralArgs ||
                       options_.tools == ToolFormat::kMistralCallId;
  for (;;) {
    switch (state_) {
      case State::kReasoning: {
        const std::string_view think_close = options_.reasoning_markers.close;
        const size_t close = held_.find(think_close);
        if (close != std::string::npos) {
          out.reasoning += held_.substr(0, close);
          held_.erase(0, close + think_close.size());
          state_ = State::kContent;
          trim_next_ = true;
          continue;
        }
        const size_t keep = at_end ? 0 : partial_marker(held_, think_close);
        out.reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::kContent: {
        if (trim_next_) {
          const size_t first = held_.find_first_not_of(" \t\r\n");
          if (first == std::string::npos) {
            held_.clear();
            return;
          }
          held_.erase(0, first);
          trim_next_ = false;
        }
        if (options_.tools == ToolFormat::kLlama3Json && !seen_content_ && !opened_block_) {
          // A Llama 3 tool call is the whole reply as one JSON object.
          const size_t first = held_.find_first_not_of(" \t\r\n");
          if (first == std::string::npos && !at_end) return;
          if (first != std::string::npos && held_[first] == '{') {
            open_block("");
            continue;
          }
        }
        std::array<std::string_view, 2> markers{};
        size_t n_markers = 0;
        const std::string_view think_open = options_.reasoning_markers.open;
        if (options_.reasoning) markers[n_markers++] = think_open;
        if (options_.tools == ToolFormat::kHermes || options_.tools == ToolFormat::kQwenXml ||
            options_.tools == ToolFormat::kGlm) {
          markers[n_markers++] = kHermesOpen;
        }
        if (mistral) markers[n_markers++] = kMistralCalls;
        if (options_.tools == ToolFormat::kLlama3Json) markers[n_markers++] = kPythonTag;
        if (options_.tools == ToolFormat::kDeepSeek || options_.tools == ToolFormat::kDeepSeekR1) {
          markers[n_markers++] = kDeepSeekCalls;
        }
        if (options_.tools == ToolFormat::kKimi) markers[n_markers++] = kKimiCalls;
        if (options_.tools == ToolFormat::kDeepSeekDsml) markers[n_markers++] = kDsmlCalls;
        if (options_.tools == ToolFormat::kDeepSeekV4) markers[n_markers++] = kDsmlToolCalls;
        if (options_.tools == ToolFormat::kGemma) markers[n_markers++] = kGemmaCall;
        size_t at = std::string::npos;
        std::string_view found;
        for (size_t i = 0; i < n_markers; ++i) {
          const size_t pos = held_.find(markers[i]);
          if (pos < at) {
            at = pos;
            found = markers[i];
          }
        }
        if (at != std::string::npos) {
          emit_content(std::string_view(held_).substr(0, at));
          held_.erase(0, at + found.size());
          if (options_.reasoning && found == think_open) {
            state_ = State::kReasoning;
          } else {
            open_block(found);
          }
          continue;
        }
        size_t keep = 0;
        if (!at_end) {
          for (size_t i = 0; i < n_markers; ++i) {
            keep = std::max(keep, partial_marker(held_, markers[i]));
          }
        }
        emit_content(std::string_view(held_).substr(0, held_.size() - keep));
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::kCallBlock: {
        const std::string_view close = block_->close;
        const size_t end = close.empty() ? std::string::npos : held_.find(close);
        if (end != std::string::npos) {
          feed_block(std::string_view(held_).substr(0, end), out);
          held_.erase(0, end + close.size());
          block_->closed = true;
          // The white space after calls separates them from what follows; after a block that
          // was text after all, it is the text's.
          trim_next_ = close_block(out);
          state_ = State::kContent;
          if (at_end && held_.empty()) return;
          continue;
        }
        const size_t keep = at_end || close.empty() ? 0 : partial_marker(held_, close);
        feed_block(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        if (at_end) {
          close_block(out);
          state_ = State::kContent;
        }
        return;
      }
    }
  }
}

}  // namespace herd::server
