#include "server/xml_call_reader.h"

#include <algorithm>

namespace herd::server {
namespace {

constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

}  // namespace

std::string XmlCallReader::partial_name() const {
  if (state_ != State::kName) return "";
  return std::string(trim(std::string_view(buffer_).substr(0, buffer_.find('>'))));
}

void XmlCallReader::feed(std::string_view text, bool at_end) {
  buffer_ += text;
  for (;;) {
    switch (state_) {
      case State::kBefore: {
        const size_t at = buffer_.find(kXmlFunction);
        if (at == std::string::npos) {
          buffer_.erase(0, buffer_.size() - partial_marker(buffer_, kXmlFunction));
          return;
        }
        buffer_.erase(0, at + kXmlFunction.size());
        state_ = State::kName;
        continue;
      }
      case State::kName:
      case State::kSkipName: {
        const size_t at = buffer_.find('>');
        if (at == std::string::npos) {
          // Past the longest name the text is no name, whatever ends it.
          if (trim(buffer_).size() > kMaxNameBytes) state_ = State::kSkipName;
          if (state_ == State::kSkipName) buffer_.clear();
          return;
        }
        if (state_ == State::kSkipName) {
          buffer_.erase(0, at + 1);
          state_ = State::kBefore;
          continue;
        }
        const std::string_view name = trim(std::string_view(buffer_).substr(0, at));
        if (!plausible_name(name)) {  // prose that mentions the marker: not a call
          buffer_.erase(0, at + 1);
          state_ = State::kBefore;
          continue;
        }
        ReadCall call;
        call.name = std::string(name);
        call.named = true;
        arguments_ = TypedArguments(true);
        arguments_.open(call);
        calls_.push_back(std::move(call));
        buffer_.erase(0, at + 1);
        state_ = State::kParameters;
        continue;
      }
      case State::kParameters: {
        const size_t parameter = buffer_.find(kParameter);
        const size_t end = buffer_.find(kFunctionEnd);
        if (end != std::string::npos && end < parameter) {
          arguments_.close(calls_.back());
          buffer_.erase(0, end + kFunctionEnd.size());
          state_ = State::kBefore;
          continue;
        }
        if (parameter == std::string::npos) {
          if (at_end) {
            arguments_.close(calls_.back());
            buffer_.clear();
            state_ = State::kBefore;
            return;
          }
          const size_t keep =
              std::max(partial_marker(buffer_, kParameter), partial_marker(buffer_, kFunctionEnd));
          buffer_.erase(0, buffer_.size() - keep);
          return;
        }
        buffer_.erase(0, parameter + kParameter.size());
        state_ = State::kKey;
        continue;
      }
      case State::kKey: {
        const size_t at = buffer_.find('>');
        if (at == std::string::npos) {
          if (at_end) {
            arguments_.close(calls_.back());
            buffer_.clear();
            state_ = State::kBefore;
          }
          return;
        }
        const std::string_view key = trim(std::string_view(buffer_).substr(0, at));
        arguments_.begin(calls_.back(), key,
                         types_ ? types_->of(calls_.back().name, key) : kJsonAny);
        buffer_.erase(0, at + 1);
        state_ = State::kValue;
        continue;
      }
      case State::kValue: {
        // A value ends at its closing, or at the function's when the model left that out.
        const size_t end = std::min(buffer_.find(kParameterEnd), buffer_.find(kFunctionEnd));
        const size_t keep = at_end ? 0
                                   : std::max(partial_marker(buffer_, kParameterEnd),
                                              partial_marker(buffer_, kFunctionEnd));
        const size_t take = end != std::string::npos ? end : buffer_.size() - keep;
        arguments_.add(calls_.back(), std::string_view(buffer_).substr(0, take));
        buffer_.erase(0, take);
        if (end == std::string::npos) {
          if (at_end) {
            arguments_.close(calls_.back());
            state_ = State::kBefore;
          }
          return;
        }
        arguments_.end(calls_.back());
        if (buffer_.starts_with(kParameterEnd)) buffer_.erase(0, kParameterEnd.size());
        state_ = State::kParameters;
        continue;
      }
    }
  }
}

}  // namespace herd::server
