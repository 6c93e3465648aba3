// DsmlReader: DeepSeek V3.2's tool calls, written in its DSML markup, read while they stream
// into calls whose arguments are JSON:
//
//   <｜DSML｜function_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜function_calls>
//
// becomes get_weather {"city":"Paris","days":3}: a string="true" value is raw text (made a
// JSON string), any other is JSON as written; a call cut short by the block's end is closed
// there. The reader is fed what lies between
// function_calls' markers, or V4's tool_calls' (OutputParser finds those).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/parser_text.h"

namespace herd::server {

constexpr std::string_view kDsmlCalls = "<｜DSML｜function_calls>";
constexpr std::string_view kDsmlCallsEnd = "</｜DSML｜function_calls>";
// DeepSeek V4 writes the same calls in a block of another name.
constexpr std::string_view kDsmlToolCalls = "<｜DSML｜tool_calls>";
constexpr std::string_view kDsmlToolCallsEnd = "</｜DSML｜tool_calls>";

class DsmlReader {
 public:
  // at_end: nothing follows (the block's end): everything held is read.
  void feed(std::string_view text, bool at_end);
  std::vector<ReadCall>& calls() { return calls_; }
  // The name being written when the text stops inside it.
  std::string partial_name() const;

 private:
  enum class State { kBefore, kName, kParameters, kParameterHead, kValue };
  void add_value(std::string_view text);
  void close_call();

  State state_ = State::kBefore;
  std::string buffer_;
  std::vector<ReadCall> calls_;
  bool string_value_ = false;  // the parameter's value is raw text
  bool first_parameter_ = true;
  bool in_string_ = false, escape_ = false;  // inside a JSON value's string
};

}  // namespace herd::server
