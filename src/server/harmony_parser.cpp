#include "server/harmony_parser.h"

#include <algorithm>
#include <array>

namespace herd::server {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kFunctions = "functions.";
// What ends a body: <|end|>, <|call|> and <|return|> by the format; <|start|> and <|channel|>
// when a model skips the end of a message (they stay, as the next header's start).
constexpr std::array<std::string_view, 5> kBodyEnds = {"<|end|>", "<|call|>", "<|return|>", kStart,
                                                       kChannel};
// How a header may begin; a longer one is no header (a model writing plain text).
constexpr std::array<std::string_view, 4> kHeaderStarts = {kStart, kChannel, " to=", "to="};
constexpr size_t kMaxHeader = 256;

// The word after `key` in a header (up to a space or a marker), empty when there is none.
std::string_view header_field(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  const std::string_view rest = header.substr(at + key.size());
  return rest.substr(0, rest.find_first_of(" <\n"));
}

}  // namespace

HarmonyParser::HarmonyParser(const OutputParserOptions& options) : options_(options) {}

bool HarmonyParser::could_be_header(std::string_view text, bool complete) const {
  // An incomplete one may end with the start of <|message|>, which does not count.
  const size_t max = complete ? kMaxHeader : kMaxHeader + kMessage.size() - 1;
  if (text.size() > max || text.find('\n') != std::string_view::npos) return false;
  return std::any_of(kHeaderStarts.begin(), kHeaderStarts.end(), [&](std::string_view start) {
    return !complete && text.size() < start.size() ? start.starts_with(text)
                                                   : text.starts_with(start);
  });
}

void HarmonyParser::announce_call(const std::string& written_name, ParsedDelta& out) {
  ToolCall piece;
  piece.index = n_tool_calls_++;
  piece.name = closest_name(written_name, options_.tool_names);
  piece.id = tool_call_id(options_, piece.index, piece.name);
  out.tool_calls.push_back(std::move(piece));
  route_ = Route::kCall;
  arguments_ = ArgumentsText();
  sent_ = 0;
  string_arguments_ = false;
}

void HarmonyParser::start_body(std::string_view header, ParsedDelta& out) {
  const std::string_view recipient = header_field(header, "to=");
  const std::string_view channel = header_field(header, kChannel);
  if (recipient.starts_with(kFunctions) && options_.tools != ToolFormat::kNone) {
    announce_call(std::string(recipient.substr(kFunctions.size())), out);
  } else {
    // A message to another recipient (a built-in tool) or a call left unread is content.
    route_ = channel == "analysis" ? Route::kReasoning : Route::kContent;
  }
}

void HarmonyParser::add_body(std::string_view text, ParsedDelta& out) {
  switch (route_) {
    case Route::kContent:
      out.content += text;
      return;
    case Route::kReasoning:
      out.reasoning += text;
      return;
    case Route::kCall:
      break;
  }
  for (char c : text) {
    if (arguments_.text().empty() && !is_space(c)) string_arguments_ = c == '"';
    arguments_.add(c);
  }
  // Arguments written as a JSON string come decoded, in one piece, when the call ends.
  if (string_arguments_ || arguments_.text().size() == sent_) return;
  ToolCall piece;
  piece.index = n_tool_calls_ - 1;
  piece.arguments = arguments_.text().substr(sent_);
  sent_ = arguments_.text().size();
  out.tool_calls.push_back(std::move(piece));
}

void HarmonyParser::end_body(ParsedDelta& out) {
  if (route_ == Route::kCall) {
    ToolCall piece;
    piece.index = n_tool_calls_ - 1;
    if (arguments_.text().empty()) {
      piece.arguments = "{}";
    } else if (string_arguments_) {
      piece.arguments = decode_string(arguments_.text());
    }
    if (!piece.arguments.empty()) out.tool_calls.push_back(std::move(piece));
  }
  route_ = Route::kContent;
}

ParsedDelta HarmonyParser::push(std::string_view text, bool at_end) {
  ParsedDelta out;
  held_ += text;
  for (;;) {
    switch (state_) {
      case State::kHeader: {
        const size_t message = held_.find(kMessage);
        // The forced call's header is the prompt's: it is a header whatever follows.
        const bool forced = options_.forced_call && n_tool_calls_ == 0;
        const std::string_view header = std::string_view(held_).substr(0, message);
        if (!forced && !could_be_header(header, message != std::string::npos)) {
          state_ = State::kRaw;
          continue;
        }
        if (message != std::string::npos) {
          start_body(header, out);
          held_.erase(0, message + kMessage.size());
          state_ = State::kBody;
          continue;
        }
        if (!at_end) return out;
        if (forced && options_.tools != ToolFormat::kNone) {
          // Cut inside the forced call's header: the call of the name written so far.
          std::string_view name = header_field(held_, "to=");
          if (name.starts_with(kFunctions)) name.remove_prefix(kFunctions.size());
          announce_call(std::string(name), out);
          end_body(out);
        } else {
          out.content += held_;
        }
        held_.clear();
        return out;
      }
      case State::kBody: {
        size_t end = std::string::npos;
        std::string_view marker;
        for (std::string_view m : kBodyEnds) {
          const size_t at = held_.find(m);
          if (at < end) {
            end = at;
            marker = m;
          }
        }
        if (end != std::string::npos) {
          add_body(std::string_view(held_).substr(0, end), out);
          end_body(out);
          // A header's start stays for the next header.
          const bool keep = marker == kStart || marker == kChannel;
          held_.erase(0, end + (keep ? 0 : marker.size()));
          state_ = State::kHeader;
          continue;
        }
        size_t keep = 0;
        if (!at_end) {
          for (std::string_view m : kBodyEnds) keep = std::max(keep, partial_marker(held_, m));
        }
        add_body(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        if (at_end) end_body(out);
        return out;
      }
      case State::kRaw:
        out.content += held_;
        held_.clear();
        return out;
    }
  }
}

}  // namespace herd::server
