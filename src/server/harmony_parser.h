// HarmonyParser: OutputParser's reading of OpenAI's harmony format, which gpt-oss writes.
// A reply is a series of messages, each a header and a body:
//
//   [<|start|>assistant][ to=R]<|channel|>CHANNEL[ to=R][ [<|constrain|>]TYPE]<|message|>BODY END
//
// where END is <|end|> (another message follows), <|call|> (a tool call; generation stops
// there) or <|return|> (the reply is over). The body of a message to functions.NAME is a
// call of NAME whose arguments are the body (when tools are read); of an `analysis` message,
// reasoning; of any other (`final`, `commentary` without a recipient), content. Text that
// does not start like a header is content, as written, to the end of the reply.
#pragma once

#include <string>
#include <string_view>

#include "server/output_parser.h"
#include "server/parser_text.h"

namespace herd::server {

class HarmonyParser {
 public:
  // options: as OutputParser's (tools, forced_call, tool_names, id_prefix are used).
  explicit HarmonyParser(const OutputParserOptions& options);
  // The next text of the reply; at_end: it is the last (everything held is handed out).
  ParsedDelta push(std::string_view text, bool at_end);
  int n_tool_calls() const { return n_tool_calls_; }

 private:
  enum class State { kHeader, kBody, kRaw };
  enum class Route { kContent, kReasoning, kCall };
  // Whether `text` is (complete) or may become (not complete) a message's header.
  bool could_be_header(std::string_view text, bool complete) const;
  void start_body(std::string_view header, ParsedDelta& out);
  void add_body(std::string_view text, ParsedDelta& out);
  void end_body(ParsedDelta& out);
  void announce_call(const std::string& written_name, ParsedDelta& out);

  OutputParserOptions options_;
  State state_ = State::kHeader;
  std::string held_;
  Route route_ = Route::kContent;
  ArgumentsText arguments_;        // the current call's (kCall)
  size_t sent_ = 0;                // of arguments_, handed out so far
  bool string_arguments_ = false;  // written as a JSON string: decoded when the call ends
  int n_tool_calls_ = 0;
};

}  // namespace herd::server
