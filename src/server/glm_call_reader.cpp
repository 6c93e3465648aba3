#include "server/glm_call_reader.h"

namespace herd::server {
namespace {

constexpr std::string_view kArgKeyEnd = "</arg_key>";
constexpr std::string_view kArgValue = "<arg_value>";
constexpr std::string_view kArgValueEnd = "</arg_value>";

}  // namespace

std::string GlmCallReader::partial_name() const {
  if (state_ != State::kName) return "";
  return std::string(trim(std::string_view(buffer_).substr(0, buffer_.find('<'))));
}

bool GlmCallReader::start_call(std::string_view name) {
  name = trim(name);
  if (!plausible_name(name)) {
    // Not a call (prose that mentions the marker): the block is text.
    buffer_.clear();
    state_ = State::kDone;
    return false;
  }
  ReadCall call;
  call.name = std::string(name);
  call.named = true;
  arguments_.open(call);
  calls_.push_back(std::move(call));
  return true;
}

void GlmCallReader::close() {
  arguments_.close(calls_.back());
  buffer_.clear();
  state_ = State::kDone;
}

void GlmCallReader::feed(std::string_view text, bool at_end) {
  if (state_ == State::kDone) return;  // one call per block: what follows it is dropped
  buffer_ += text;
  for (;;) {
    switch (state_) {
      case State::kName: {
        const size_t key = buffer_.find(kGlmArgKey);
        const size_t name_from = buffer_.find_first_not_of(" \t\r\n");
        const size_t newline =
            name_from == std::string::npos ? std::string::npos : buffer_.find('\n', name_from);
        const size_t end = std::min(key, newline);
        if (end == std::string::npos) {
          // Past the longest name the text is no name, whatever ends it (start_call says so);
          // an <arg_key> that may be coming is not the name's.
          const std::string_view head = std::string_view(buffer_).substr(
              0, buffer_.size() - partial_marker(buffer_, kGlmArgKey));
          if (!at_end && trim(head).size() <= kMaxNameBytes) return;
          if (name_from == std::string::npos) return;  // an empty block: no call
          if (start_call(buffer_)) close();
          return;
        }
        if (!start_call(std::string_view(buffer_).substr(0, end))) return;
        buffer_.erase(0, end == key ? key + kGlmArgKey.size() : end);
        state_ = end == key ? State::kKey : State::kParameters;
        continue;
      }
      case State::kParameters: {
        const size_t key = buffer_.find(kGlmArgKey);
        if (key == std::string::npos) {
          if (at_end) return close();
          buffer_.erase(0, buffer_.size() - partial_marker(buffer_, kGlmArgKey));
          return;
        }
        buffer_.erase(0, key + kGlmArgKey.size());
        state_ = State::kKey;
        continue;
      }
      case State::kKey: {
        const size_t end = buffer_.find(kArgKeyEnd);
        if (end == std::string::npos) {
          if (at_end) close();
          return;
        }
        key_ = std::string(trim(std::string_view(buffer_).substr(0, end)));
        buffer_.erase(0, end + kArgKeyEnd.size());
        state_ = State::kBeforeValue;
        continue;
      }
      case State::kBeforeValue: {
        const size_t value = buffer_.find(kArgValue);
        if (value == std::string::npos) {
          if (at_end) return close();  // a key without a value is dropped
          buffer_.erase(0, buffer_.size() - partial_marker(buffer_, kArgValue));
          return;
        }
        arguments_.begin(calls_.back(), key_,
                         types_ ? types_->of(calls_.back().name, key_) : kJsonAny);
        buffer_.erase(0, value + kArgValue.size());
        state_ = State::kValue;
        continue;
      }
      case State::kValue: {
        const size_t end = buffer_.find(kArgValueEnd);
        const size_t keep = at_end ? 0 : partial_marker(buffer_, kArgValueEnd);
        const size_t take = end != std::string::npos ? end : buffer_.size() - keep;
        arguments_.add(calls_.back(), std::string_view(buffer_).substr(0, take));
        if (end == std::string::npos) {
          buffer_.erase(0, take);
          if (at_end) close();
          return;
        }
        arguments_.end(calls_.back());
        buffer_.erase(0, end + kArgValueEnd.size());
        state_ = State::kParameters;
        continue;
      }
      case State::kDone:
        return;
    }
  }
}

}  // namespace herd::server
