#include "server/json_call_reader.h"

namespace herd::server {

void JsonCallReader::feed(char c) {
  if (in_string_) {
    if (role_ != Role::kNone) token_ += c;
    if (value_ == Value::kArguments) calls_.back().arguments += c;
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      in_string_ = false;
      end_string();
    }
    return;
  }
  if (value_ != Value::kNone) {
    const bool at_call = stack_.size() == call_depth_;
    if (at_call && (c == ',' || c == '}' || c == ']')) {
      end_value();  // a scalar ends before c, which belongs to the call object
    } else {
      if (value_ == Value::kArguments && !is_space(c)) calls_.back().arguments += c;
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        stack_ += c;
      } else if ((c == '}' || c == ']') && stack_.size() > call_depth_) {
        stack_.pop_back();
        if (stack_.size() == call_depth_ && !value_scalar_) end_value();
      }
      return;
    }
  }
  if (call_depth_ > 0 && stack_.size() == call_depth_) {
    call_level(c);
    return;
  }
  // Outside any call object.
  if (c == '"') {
    if (!stack_.empty()) in_string_ = true;  // a string inside a value that is no call
  } else if (c == '{') {
    stack_ += c;
    if (stack_.size() == 1 || stack_ == "[{") {
      call_depth_ = stack_.size();
      calls_.emplace_back();
      phase_ = Phase::kKey;
    }
  } else if (c == '[') {
    stack_ += c;
  } else if ((c == '}' || c == ']') && !stack_.empty()) {
    stack_.pop_back();
  }
}

void JsonCallReader::call_level(char c) {
  if (c == '}') {
    stack_.pop_back();
    call_depth_ = 0;
    calls_.back().done = true;
    return;
  }
  switch (phase_) {
    case Phase::kKey:
      if (c == '"') start_token(Role::kKey);
      break;
    case Phase::kColon:
      if (c == ':') phase_ = Phase::kValue;
      break;
    case Phase::kValue:
      if (is_space(c)) break;
      // A repeated name key is skipped, as a repeated arguments key is (below): the first
      // name may have been streamed already.
      if (key_ == "name" && c == '"' && !calls_.back().named) {
        start_token(Role::kName);
        break;
      }
      value_ = Value::kSkip;
      // A repeated arguments key is skipped: the first one's text may have been streamed
      // already, and a stream cannot take text back.
      if ((key_ == "arguments" || key_ == "parameters") && !calls_.back().has_arguments) {
        ReadCall& call = calls_.back();
        value_ = Value::kArguments;
        call.has_arguments = true;
        call.arguments_string = c == '"';
      }
      value_scalar_ = c != '"' && c != '{' && c != '[';
      feed(c);
      break;
    case Phase::kAfterValue:
      if (c == ',') phase_ = Phase::kKey;
      break;
  }
}

void JsonCallReader::start_token(Role role) {
  role_ = role;
  token_ = "\"";
  in_string_ = true;
}

void JsonCallReader::end_string() {
  if (role_ == Role::kKey) {
    key_ = decode_string(token_);
    phase_ = Phase::kColon;
  } else if (role_ == Role::kName) {
    calls_.back().name = decode_string(token_);
    calls_.back().named = true;
    phase_ = Phase::kAfterValue;
  } else if (value_ != Value::kNone && stack_.size() == call_depth_ && !value_scalar_) {
    end_value();  // a string value
  }
  role_ = Role::kNone;
}

void JsonCallReader::end_value() {
  value_ = Value::kNone;
  phase_ = Phase::kAfterValue;
}

}  // namespace herd::server
