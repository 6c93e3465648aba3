#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace herd::tokenizer {
namespace {

std::vector<std::string> split(const PreTokenizer& pt, std::string_view text) {
  std::vector<std::string_view> pieces, scratch;
  pt.split(text, pieces, scratch);
  return {pieces.begin(), pieces.end()};
}

TEST(PreTokenizer, Gpt2SplitsWordsContractionsAndSpaces) {
  const auto pt = PreTokenizer::for_name("gpt-2");
  EXPECT_EQ(split(pt, "Hello world's  test!!"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " test", "!!"}));
  EXPECT_TRUE(split(pt, "").empty());
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndKeepsNewlines) {
  const auto pt = PreTokenizer::for_name("llama-bpe");
  EXPECT_EQ(split(pt, "12345 ab\n\ncd"),
            (std::vector<std::string>{"123", "45", " ab", "\n\n", "cd"}));
  EXPECT_EQ(split(pt, "I'M"), (std::vector<std::string>{"I", "'M"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  const auto pt = PreTokenizer::for_name("qwen2");
  EXPECT_EQ(split(pt, "x=123"), (std::vector<std::string>{"x", "=", "1", "2", "3"}));
}

TEST(PreTokenizer, SequencesApplyEachExpressionToEachPiece) {
  // falcon: punctuation runs first, then GPT-2's expression inside the rest, then digits
  // in threes inside those pieces.
  const auto pt = PreTokenizer::for_name("falcon");
  EXPECT_EQ(split(pt, "a, 12345"), (std::vector<std::string>{"a", ",", " ", "123", "45"}));
}

TEST(PreTokenizer, PiecesCoverArbitraryBytesExactly) {
  const std::string text = "ok \xFF\xFE bad \xE2\x82 mid\xF0\x9F\x98\x80 end";
  for (const char* name :
       {"llama3", "qwen2", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon", "starcoder",
        "refact", "default", "deepseek-v3", "bloom", "viking", "chatglm-bpe"}) {
    const auto pt = PreTokenizer::for_name(name);
    std::string joined;
    for (const auto& piece : split(pt, text)) {
      EXPECT_FALSE(piece.empty()) << name;
      joined += piece;
    }
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(PreTokenizer, UnknownNameIsAnError) {
  try {
    PreTokenizer::for_name("no-such-pre");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown pre-tokenizer 'no-such-pre'"), std::string::npos);
  }
}

TEST(PreTokenizer, BadPatternIsAnError) {
  EXPECT_THROW(PreTokenizer::from_patterns({"(unclosed"}), Error);
}

}  // namespace
}  // namespace herd::tokenizer
