// Text helpers shared by the output parsers (output_parser.cpp, harmony_parser.cpp): markers
// that may be cut between two pieces of a stream, JSON strings, and a call's arguments text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace herd::server {

inline bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s);

// The length of the longest tail of `text` that is a proper prefix of `marker`: what must be
// held back because the next piece may complete the marker.
size_t partial_marker(std::string_view text, std::string_view marker);

// A JSON string token (quotes included) as text; what lies between the quotes when it does
// not parse (a token cut short).
std::string decode_string(const std::string& token);

// `text` escaped for the inside of a JSON string, byte by byte (a UTF-8 character cut
// between two pieces stays valid once both are written).
std::string json_escaped(std::string_view text);

// Whether `name` can be a function's name: not empty, at most 256 bytes, without white space,
// quotes, angle brackets or braces. Formats whose names are bare text (GLM's, Qwen's XML,
// Gemma 4's) read a block whose name is not one as text: prose that mentions a marker is
// not a call.
bool plausible_name(std::string_view name);
// The longest plausible name: a reader whose name has grown past it without ending stops
// waiting for its end (prose would otherwise be scanned again with every piece).
constexpr size_t kMaxNameBytes = 256;

// The listed name closest to `written`: itself when listed (or nothing is listed), else the
// one sharing the longest prefix with it, the first on a tie.
std::string closest_name(const std::string& written, const std::vector<std::string>& names);

// One tool call as a reader of a format has seen it so far.
struct ReadCall {
  std::string name;  // complete once `named`
  bool named = false;
  std::string arguments;  // the value's text so far, whitespace outside strings removed
  bool has_arguments = false;
  bool arguments_string = false;  // the value is a JSON string (of JSON, some models do that)
  bool done = false;              // nothing more will be added
};

// A call's arguments as the model writes them, with the white space outside JSON strings
// removed (so a call reads the same streamed or not, and an object comes out compact).
class ArgumentsText {
 public:
  void add(char c);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  bool in_string_ = false, escape_ = false;
};

}  // namespace herd::server
