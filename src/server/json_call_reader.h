// JsonCallReader: tool calls written as JSON (Hermes, Llama 3, Mistral), read while they
// stream, one character at a time: a call object, an array of them, or several in a row, each
// {"name": ..., "arguments" or "parameters": ...} with its keys in any order. Text between
// top-level values is ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/parser_text.h"

namespace herd::server {

class JsonCallReader {
 public:
  void feed(std::string_view text) {
    for (char c : text) feed(c);
  }
  std::vector<ReadCall>& calls() { return calls_; }
  // The name being written when the text stops inside it (a forced call cut short).
  std::string partial_name() const { return role_ == Role::kName ? decode_string(token_) : ""; }

 private:
  enum class Phase { kKey, kColon, kValue, kAfterValue };
  enum class Role { kNone, kKey, kName };  // what the string being read is
  enum class Value { kNone, kArguments, kSkip };

  void feed(char c);
  void call_level(char c);
  void start_token(Role role);
  void end_string();
  void end_value();

  std::vector<ReadCall> calls_;
  std::string stack_;      // the open containers, '{' or '['
  size_t call_depth_ = 0;  // stack_.size() inside the current call object, 0: none
  bool in_string_ = false, escape_ = false;
  Phase phase_ = Phase::kKey;
  Role role_ = Role::kNone;
  std::string token_;  // the string being read (role_ != kNone), quotes included
  std::string key_;    // the last key of the call object
  Value value_ = Value::kNone;
  bool value_scalar_ = false;  // the value is a number, literal or junk: ends at , } or ]
};

}  // namespace herd::server
