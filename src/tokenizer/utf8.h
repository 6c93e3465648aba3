// UTF-8 helpers shared by the tokenizers and the streaming decoder. Inputs are arbitrary
// bytes: nothing here assumes valid UTF-8, and invalid sequences are reported, not trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace herd::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// One decoded character: its code point and how many bytes it took. When `valid` is false,
// `length` is the length of the maximal invalid subpart (at least 1), as Unicode recommends
// for replacement, and `cp` is kReplacementChar.
struct Utf8Char {
  uint32_t cp = 0;
  uint32_t length = 0;
  bool valid = false;
};

// Decodes the character starting at text[pos]. REQUIRES: pos < text.size().
// A sequence cut short by the end of `text` is invalid here; see utf8_incomplete_tail.
Utf8Char decode_utf8(std::string_view text, size_t pos);

// How many bytes at the end of `text` are the beginning of a character that is still
// incomplete but could become valid with more bytes (0..3).
size_t utf8_incomplete_tail(std::string_view text);

// Appends the UTF-8 encoding of cp (cp must be a Unicode scalar value or kReplacementChar).
void append_utf8(std::string& out, uint32_t cp);

// Copies text, replacing every invalid subpart with U+FFFD.
std::string sanitize_utf8(std::string_view text);

}  // namespace herd::tokenizer
