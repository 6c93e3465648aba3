#include "server/output_parser.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

namespace herd::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest tail of `text` that is a proper prefix of `marker`.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ToolFormat detect_tool_format(std::string_view source) {
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolFormat::kHermes;
  if (source.find(kMistralCalls) != std::string_view::npos) return ToolFormat::kMistral;
  if (source.find("ipython") != std::string_view::npos ||
      source.find(kPythonTag) != std::string_view::npos) {
    return ToolFormat::kLlama3Json;
  }
  return ToolFormat::kNone;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

OutputParser::OutputParser(OutputParserOptions options)
    : options_(std::move(options)),
      state_(options_.reasoning && options_.starts_in_reasoning ? State::kReasoning
                                                                : State::kContent) {}

ParsedDelta OutputParser::push(std::string_view text) {
  held_ += text;
  ParsedDelta out;
  drain(out, false);
  return out;
}

ParsedDelta OutputParser::finish() {
  ParsedDelta out;
  drain(out, true);
  return out;
}

void OutputParser::add_call(std::string name, std::string arguments, ParsedDelta& out) {
  ToolCall call;
  call.id = options_.id_prefix + std::to_string(n_tool_calls_++);
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  out.tool_calls.push_back(std::move(call));
}

// All or nothing: the calls are added only when every one of them parses.
bool OutputParser::parse_calls(std::string_view text, ParsedDelta& out) {
  using json = nlohmann::ordered_json;
  text = trim(text);
  while (text.starts_with(kPythonTag)) text = trim(text.substr(kPythonTag.size()));
  std::vector<std::pair<std::string, std::string>> calls;
  auto from_object = [&](const json& call) {
    if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return false;
    const json* args = nullptr;
    if (call.contains("arguments")) args = &call["arguments"];
    if (!args && call.contains("parameters")) args = &call["parameters"];
    std::string arguments = "{}";
    if (args) arguments = args->is_string() ? args->get<std::string>() : args->dump();
    calls.emplace_back(call["name"].get<std::string>(), std::move(arguments));
    return true;
  };
  if (text.find(kMistralArgs) != std::string_view::npos) {
    // name[ARGS]{...}, repeated with [TOOL_CALLS] between.
    while (!text.empty()) {
      const size_t args = text.find(kMistralArgs);
      if (args == std::string_view::npos) return false;
      const std::string name(trim(text.substr(0, args)));
      text.remove_prefix(args + kMistralArgs.size());
      const size_t next = text.find(kMistralCalls);
      const json value = json::parse(text.substr(0, next), nullptr, false);
      if (name.empty() || value.is_discarded() || !value.is_object()) return false;
      calls.emplace_back(name, value.dump());
      text = next == std::string_view::npos ? std::string_view()
                                            : trim(text.substr(next + kMistralCalls.size()));
    }
  } else {
    const json value = json::parse(text, nullptr, false);
    if (value.is_discarded()) return false;
    if (value.is_array()) {
      if (value.empty()) return false;
      for (const json& call : value) {
        if (!from_object(call)) return false;
      }
    } else if (!from_object(value)) {
      return false;
    }
  }
  for (auto& [name, arguments] : calls) add_call(std::move(name), std::move(arguments), out);
  return true;
}

void OutputParser::drain(ParsedDelta& out, bool at_end) {
  auto emit_content = [&](std::string_view text) {
    if (std::any_of(text.begin(), text.end(), [](char c) { return !is_space(c); })) {
      seen_content_ = true;
    }
    out.content += text;
  };
  for (;;) {
    switch (state_) {
      case State::kReasoning: {
        const size_t close = held_.find(kThinkClose);
        if (close != std::string::npos) {
          out.reasoning += held_.substr(0, close);
          held_.erase(0, close + kThinkClose.size());
          state_ = State::kContent;
          trim_next_ = true;
          continue;
        }
        const size_t keep = at_end ? 0 : partial_marker(held_, kThinkClose);
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
        if (options_.tools == ToolFormat::kLlama3Json && !seen_content_) {
          // A Llama 3 tool call is the whole reply as one JSON object.
          const size_t first = held_.find_first_not_of(" \t\r\n");
          if (first == std::string::npos && !at_end) return;
          if (first != std::string::npos && held_[first] == '{') {
            state_ = State::kRestIsCalls;
            rest_marker_.clear();
            continue;
          }
        }
        std::array<std::string_view, 2> markers{};
        size_t n_markers = 0;
        if (options_.reasoning) markers[n_markers++] = kThinkOpen;
        if (options_.tools == ToolFormat::kHermes) markers[n_markers++] = kHermesOpen;
        if (options_.tools == ToolFormat::kMistral) markers[n_markers++] = kMistralCalls;
        if (options_.tools == ToolFormat::kLlama3Json) markers[n_markers++] = kPythonTag;
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
          if (found == kThinkOpen) {
            state_ = State::kReasoning;
          } else if (found == kHermesOpen) {
            state_ = State::kHermesCall;
          } else {
            state_ = State::kRestIsCalls;
            rest_marker_ = std::string(found);
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
      case State::kHermesCall: {
        const size_t close = held_.find(kHermesClose);
        if (close == std::string::npos && !at_end) return;
        const std::string body = held_.substr(0, close);
        if (!parse_calls(body, out)) {
          emit_content(std::string(kHermesOpen) + body +
                       (close == std::string::npos ? "" : std::string(kHermesClose)));
        }
        held_.erase(0, close == std::string::npos ? held_.size() : close + kHermesClose.size());
        state_ = State::kContent;
        trim_next_ = true;
        if (at_end && held_.empty()) return;
        continue;
      }
      case State::kRestIsCalls: {
        if (!at_end) return;
        std::string body = held_;
        // Mistral writes [TOOL_CALLS] before each call of the name[ARGS] form.
        if (!parse_calls(body, out)) emit_content(rest_marker_ + body);
        held_.clear();
        return;
      }
    }
  }
}

}  // namespace herd::server
