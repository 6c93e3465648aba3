#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace herd::tokenizer {

namespace {

constexpr bool stands_for_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// The alphabet ends at U+0100 + 68 - 1 = U+0143.
constexpr uint32_t kAlphabetEnd = 0x144;

struct Alphabet {
  std::array<uint16_t, 256> to_cp{};
  std::array<int16_t, kAlphabetEnd> to_byte{};
};

constexpr Alphabet make_alphabet() {
  Alphabet a;
  for (auto& b : a.to_byte) b = -1;
  uint32_t next = 0x100;
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t cp = stands_for_itself(b) ? b : next++;
    a.to_cp[b] = static_cast<uint16_t>(cp);
    a.to_byte[cp] = static_cast<int16_t>(b);
  }
  return a;
}

constexpr Alphabet kAlphabet = make_alphabet();

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) {
  return kAlphabet.to_cp[b];
}

int byte_from_codepoint(uint32_t cp) {
  return cp < kAlphabetEnd ? kAlphabet.to_byte[cp] : -1;
}

void append_byte_level(std::string& out, std::string_view raw) {
  for (char c : raw) append_utf8(out, byte_to_codepoint(static_cast<uint8_t>(c)));
}

void append_byte_level_decoded(std::string& out, std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Char c = decode_utf8(text, pos);
    const int b = c.valid ? byte_from_codepoint(c.cp) : -1;
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(pos, c.length));
    }
    pos += c.length;
  }
}

}  // namespace herd::tokenizer
