#include "tokenizer/utf8.h"

namespace herd::tokenizer {

namespace {

bool is_continuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// Bounds of the second byte for a lead byte (Unicode Table 3-7, well-formed byte
// sequences); this is what rules out overlong forms, surrogates and code points past
// U+10FFFF. Returns the sequence length, or 0 for a byte that cannot start a character.
uint32_t lead_info(uint8_t lead, uint8_t& second_lo, uint8_t& second_hi) {
  second_lo = 0x80;
  second_hi = 0xBF;
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) {
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;
    return 3;
  }
  if (lead < 0xF5) {
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;
    return 4;
  }
  return 0;
}

}  // namespace

Utf8Char decode_utf8(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const uint8_t lead = s[pos];
  uint8_t lo = 0, hi = 0;
  const uint32_t length = lead_info(lead, lo, hi);
  if (length == 1) return {lead, 1, true};
  if (length == 0) return {kReplacementChar, 1, false};
  uint32_t cp = lead & (0xFF >> (length + 1));
  for (uint32_t i = 1; i < length; ++i) {
    if (pos + i >= n) return {kReplacementChar, i, false};
    const uint8_t b = s[pos + i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!ok) return {kReplacementChar, i, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, length, true};
}

size_t utf8_incomplete_tail(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  // A character is at most 4 bytes, so an incomplete one starts in the last 3.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = s[n - back];
    if (is_continuation(b)) continue;
    uint8_t lo = 0, hi = 0;
    const uint32_t length = lead_info(b, lo, hi);
    if (length <= back) return 0;  // complete, ASCII, or not a lead byte
    for (size_t i = 1; i < back; ++i) {
      const uint8_t c = s[n - back + i];
      const bool ok = i == 1 ? (c >= lo && c <= hi) : is_continuation(c);
      if (!ok) return 0;
    }
    return back;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.valid) {
      out.append(text.substr(pos, c.length));
    } else {
      append_utf8(out, kReplacementChar);
    }
    pos += c.length;
  }
  return out;
}

}  // namespace herd::tokenizer
