#include "server/gemma_call_reader.h"

#include <nlohmann/json.hpp>

namespace herd::server {
namespace {

constexpr std::string_view kQuote = "<|\"|>";
constexpr std::string_view kCallPrefix = "call:";

std::string_view call_name(std::string_view head) {
  head = trim(head);
  if (head.starts_with(kCallPrefix)) head.remove_prefix(kCallPrefix.size());
  return trim(head);
}

// A bare value as JSON: a number or literal as it stands, Python's spellings of the literals
// (the template prints a None with Python's str()) as JSON's; "" when it is none of these.
std::string_view bare_json(std::string_view token) {
  if (token == "true" || token == "True") return "true";
  if (token == "false" || token == "False") return "false";
  if (token == "null" || token == "None") return "null";
  if (token.empty() || token.size() > 64) return {};
  const char c = token.front();
  if (c != '-' && (c < '0' || c > '9')) return {};
  const nlohmann::json v = nlohmann::json::parse(token, nullptr, false);
  return v.is_number() ? token : std::string_view();
}

}  // namespace

std::string GemmaCallReader::partial_name() const {
  if (state_ != State::kName) return "";
  return std::string(call_name(std::string_view(buffer_).substr(0, buffer_.find('{'))));
}

void GemmaCallReader::flush_bare() {
  if (bare_.empty()) return;
  const std::string_view token = trim(bare_);
  const std::string_view json = expect_key_ ? std::string_view() : bare_json(token);
  if (!json.empty()) {
    out() += json;
  } else {
    out() += '"';
    out() += json_escaped(token);
    out() += '"';
  }
  bare_.clear();
}

void GemmaCallReader::add(char c) {
  switch (c) {
    case '{':
    case '[':
      flush_bare();
      out() += c;
      stack_ += c;
      expect_key_ = c == '{';
      return;
    case '}':
    case ']':
      flush_bare();
      if (stack_.empty()) return;
      out() += stack_.back() == '{' ? '}' : ']';
      stack_.pop_back();
      expect_key_ = false;
      if (stack_.empty()) {
        calls_.back().done = true;
        state_ = State::kDone;
      }
      return;
    case ',':
      flush_bare();
      out() += c;
      expect_key_ = !stack_.empty() && stack_.back() == '{';
      return;
    case ':':
      flush_bare();
      out() += c;
      expect_key_ = false;
      return;
    default:
      // A key may hold spaces (the template writes them as they are); a value ends at one.
      if (is_space(c)) {
        if (expect_key_ && !bare_.empty()) bare_ += c;
        if (!expect_key_) flush_bare();
        return;
      }
      bare_ += c;
  }
}

void GemmaCallReader::feed(std::string_view text, bool at_end) {
  if (state_ == State::kDone) return;  // one call per block: what follows it is dropped
  buffer_ += text;
  if (state_ == State::kName) {
    const size_t brace = buffer_.find('{');
    if (brace == std::string::npos) {
      // Past the longest name the text is no name, whatever ends it.
      if (!at_end && call_name(buffer_).size() <= kMaxNameBytes) return;
      if (trim(buffer_).empty()) return;
      state_ = State::kDone;
      if (!plausible_name(call_name(buffer_))) return;  // prose: the block is text
      ReadCall call;                                    // a call without arguments
      call.name = std::string(call_name(buffer_));
      call.named = true;
      calls_.push_back(std::move(call));
      return;
    }
    const std::string_view name = call_name(std::string_view(buffer_).substr(0, brace));
    if (!plausible_name(name)) {  // prose that mentions the marker: the block is text
      state_ = State::kDone;
      return;
    }
    ReadCall call;
    call.name = std::string(name);
    call.named = true;
    call.has_arguments = true;
    calls_.push_back(std::move(call));
    buffer_.erase(0, brace);
    state_ = State::kArguments;
  }
  size_t i = 0;
  while (i < buffer_.size() && state_ == State::kArguments) {
    const std::string_view rest = std::string_view(buffer_).substr(i);
    if (in_string_) {
      const size_t end = rest.find(kQuote);
      const size_t keep = at_end ? 0 : partial_marker(rest, kQuote);
      const size_t take = end != std::string_view::npos ? end : rest.size() - keep;
      out() += json_escaped(rest.substr(0, take));
      i += take;
      if (end == std::string_view::npos) break;
      out() += '"';
      in_string_ = false;
      i += kQuote.size();
      continue;
    }
    if (rest.starts_with(kQuote)) {
      flush_bare();
      out() += '"';
      in_string_ = true;
      i += kQuote.size();
      continue;
    }
    if (!at_end && rest.size() < kQuote.size() && kQuote.starts_with(rest)) break;
    add(rest.front());
    ++i;
  }
  buffer_.erase(0, i);
  if (at_end && state_ == State::kArguments) {
    // Cut short: what was written, closed.
    if (in_string_) out() += '"';
    in_string_ = false;
    flush_bare();
    while (!stack_.empty()) add(stack_.back() == '{' ? '}' : ']');
  }
}

}  // namespace herd::server
