// GemmaCallReader: Gemma 4's tool calls, one in each <|tool_call>...<tool_call|> block,
// read while they stream into calls whose arguments are JSON:
//
//   <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,opts:{units:<|"|>C<|"|>}}<tool_call|>
//
// becomes get_weather {"city":"Paris","days":3,"opts":{"units":"C"}}: keys are bare, strings
// are quoted by <|"|> and hold raw text; numbers, true, false and null are JSON's (and
// Python's True, False and None, which the template prints for a None). A bare value that is
// none of these is made a string. The reader is fed what lies between the
// block's markers (OutputParser finds those); the call ends with its outermost brace.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/parser_text.h"

namespace herd::server {

constexpr std::string_view kGemmaCall = "<|tool_call>";
constexpr std::string_view kGemmaCallEnd = "<tool_call|>";

class GemmaCallReader {
 public:
  // at_end: nothing follows (the block's end): everything held is read, and containers and
  // a string left open are closed.
  void feed(std::string_view text, bool at_end);
  std::vector<ReadCall>& calls() { return calls_; }
  // The name being written when the text stops inside it.
  std::string partial_name() const;

 private:
  enum class State { kName, kArguments, kDone };
  void add(char c);   // one character outside strings
  void flush_bare();  // a bare key or value is complete
  std::string& out() { return calls_.back().arguments; }

  State state_ = State::kName;
  std::string buffer_;
  std::vector<ReadCall> calls_;
  std::string stack_;  // open containers, '{' or '['
  bool in_string_ = false;
  bool expect_key_ = false;  // a key comes next (in an object, after '{' or ',')
  std::string bare_;         // a bare key or value being read
};

}  // namespace herd::server
