#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"

namespace herd::tokenizer {
namespace {

TEST(Utf8, DecodesValidCharactersOfEveryLength) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  EXPECT_EQ(decode_utf8(text, 0).cp, 'a');
  EXPECT_EQ(decode_utf8(text, 1).cp, 0xE9u);
  EXPECT_EQ(decode_utf8(text, 1).length, 2u);
  EXPECT_EQ(decode_utf8(text, 3).cp, 0x20ACu);
  EXPECT_EQ(decode_utf8(text, 6).cp, 0x1F600u);
  EXPECT_EQ(decode_utf8(text, 6).length, 4u);
  EXPECT_TRUE(decode_utf8(text, 6).valid);
}

TEST(Utf8, RejectsOverlongSurrogatesAndStrayBytes) {
  EXPECT_FALSE(decode_utf8("\xC0\x80", 0).valid);          // overlong NUL
  EXPECT_FALSE(decode_utf8("\xED\xA0\x80", 0).valid);      // surrogate U+D800
  EXPECT_FALSE(decode_utf8("\xF4\x90\x80\x80", 0).valid);  // past U+10FFFF
  EXPECT_FALSE(decode_utf8("\x80", 0).valid);              // continuation without lead
  EXPECT_EQ(decode_utf8("\xE2\x82X", 0).length, 2u);       // maximal invalid subpart
}

TEST(Utf8, FindsTheIncompleteTail) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("ab"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("a\xF0\x9F\x98\x80"), 0u);  // complete
  EXPECT_EQ(utf8_incomplete_tail("a\xE0\x80"), 0u);          // can never complete
  EXPECT_EQ(utf8_incomplete_tail("\xFF"), 0u);
}

TEST(Utf8, SanitizeReplacesInvalidBytes) {
  EXPECT_EQ(sanitize_utf8("ok"), "ok");
  EXPECT_EQ(sanitize_utf8("a\xFF"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F"), "\xEF\xBF\xBD");
}

TEST(ByteLevel, SpellsEveryByteAsOneCharacterAndBack) {
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_codepoint('A'), static_cast<uint32_t>('A'));
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string spelled;
  append_byte_level(spelled, all);
  std::string back;
  append_byte_level_decoded(back, spelled);
  EXPECT_EQ(back, all);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(byte_from_codepoint(byte_to_codepoint(static_cast<uint8_t>(b))), b);
  }
}

}  // namespace
}  // namespace herd::tokenizer
