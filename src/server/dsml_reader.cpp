#include "server/dsml_reader.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace herd::server {
namespace {

constexpr std::string_view kInvoke = "<｜DSML｜invoke name=\"";
constexpr std::string_view kInvokeEnd = "</｜DSML｜invoke>";
constexpr std::string_view kParameter = "<｜DSML｜parameter name=\"";
constexpr std::string_view kParameterEnd = "</｜DSML｜parameter>";
constexpr std::string_view kHeadEnd = "\">";

}  // namespace

std::string DsmlReader::partial_name() const {
  if (state_ != State::kName) return "";
  return std::string(trim(std::string_view(buffer_).substr(0, buffer_.find('"'))));
}

void DsmlReader::add_value(std::string_view text) {
  ReadCall& call = calls_.back();
  if (string_value_) {
    call.arguments += json_escaped(text);
    return;
  }
  for (char c : text) {
    if (in_string_ || !is_space(c)) call.arguments += c;
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
}

// The reply ended inside the call: it is closed there, so its arguments are an object.
void DsmlReader::close_call() {
  calls_.back().arguments += '}';
  calls_.back().done = true;
  buffer_.clear();
  state_ = State::kBefore;
}

void DsmlReader::feed(std::string_view text, bool at_end) {
  buffer_ += text;
  for (;;) {
    switch (state_) {
      case State::kBefore: {
        const size_t at = buffer_.find(kInvoke);
        if (at == std::string::npos) {
          buffer_.erase(0, buffer_.size() - partial_marker(buffer_, kInvoke));
          return;
        }
        buffer_.erase(0, at + kInvoke.size());
        state_ = State::kName;
        continue;
      }
      case State::kName: {
        const size_t at = buffer_.find(kHeadEnd);
        if (at == std::string::npos) return;
        ReadCall call;
        call.name = std::string(trim(std::string_view(buffer_).substr(0, at)));
        call.named = !call.name.empty();
        call.has_arguments = true;
        call.arguments.push_back('{');
        calls_.push_back(std::move(call));
        buffer_.erase(0, at + kHeadEnd.size());
        first_parameter_ = true;
        state_ = State::kParameters;
        continue;
      }
      case State::kParameters: {
        const size_t parameter = buffer_.find(kParameter);
        const size_t end = buffer_.find(kInvokeEnd);
        if (end != std::string::npos && end < parameter) {
          calls_.back().arguments += '}';
          calls_.back().done = true;
          buffer_.erase(0, end + kInvokeEnd.size());
          state_ = State::kBefore;
          continue;
        }
        if (parameter == std::string::npos) {
          if (at_end) return close_call();
          const size_t keep =
              std::max(partial_marker(buffer_, kParameter), partial_marker(buffer_, kInvokeEnd));
          buffer_.erase(0, buffer_.size() - keep);
          return;
        }
        buffer_.erase(0, parameter + kParameter.size());
        state_ = State::kParameterHead;
        continue;
      }
      case State::kParameterHead: {
        // name="K" string="true|false">: the name, then the kind of value.
        const size_t at = buffer_.find(kHeadEnd);
        if (at == std::string::npos) {
          if (at_end) close_call();
          return;
        }
        const std::string_view head = std::string_view(buffer_).substr(0, at);
        const size_t quote = head.find('"');
        const std::string key(head.substr(0, quote));
        string_value_ = quote != std::string_view::npos &&
                        head.substr(quote).find("string=\"true") != std::string_view::npos;
        ReadCall& call = calls_.back();
        if (!first_parameter_) call.arguments += ',';
        first_parameter_ = false;
        call.arguments +=
            nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        call.arguments += string_value_ ? ":\"" : ":";
        in_string_ = escape_ = false;
        buffer_.erase(0, at + kHeadEnd.size());
        state_ = State::kValue;
        continue;
      }
      case State::kValue: {
        const size_t end = buffer_.find(kParameterEnd);
        const size_t keep = at_end ? 0 : partial_marker(buffer_, kParameterEnd);
        const size_t take = end != std::string::npos ? end : buffer_.size() - keep;
        add_value(std::string_view(buffer_).substr(0, take));
        if (end == std::string::npos) {
          buffer_.erase(0, take);
          if (at_end) {
            if (string_value_) calls_.back().arguments += '"';
            close_call();
          }
          return;
        }
        if (string_value_) calls_.back().arguments += '"';
        buffer_.erase(0, end + kParameterEnd.size());
        state_ = State::kParameters;
        continue;
      }
    }
  }
}

}  // namespace herd::server
