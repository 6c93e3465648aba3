#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>

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

// The expected pieces of the gpt-4o and kimi-k2 cases were checked against the
// tokenizers' own patterns (o200k_base as in tiktoken; Moonshot's tokenization_kimi.py
// pat_str, class intersection included) run by Python's `regex` module (V1 mode), a
// different engine from PCRE2.

TEST(PreTokenizer, Gpt4oCutsBeforeCapitalsAndKeepsMarksInWords) {
  const auto pt = PreTokenizer::for_name("gpt-4o");
  EXPECT_EQ(split(pt, "getUserName iPhone"),
            (std::vector<std::string>{"get", "User", "Name", " i", "Phone"}));
  // Contractions stay on their word, in either case; digits go in threes.
  EXPECT_EQ(split(pt, "I'M HERE you're 12345"),
            (std::vector<std::string>{"I'M", " HERE", " you're", " ", "123", "45"}));
  // កាន់តែ: Khmer vowel signs and U+17CB are marks (Mc/Mn), part of the word.
  EXPECT_EQ(split(pt, "\u1780\u17B6\u1793\u17CB\u178F\u17C2"),
            (std::vector<std::string>{"\u1780\u17B6\u1793\u17CB\u178F\u17C2"}));
  // Han is a letter like any other here (contrast with kimi-k2 below).
  EXPECT_EQ(split(pt, "\u5317\u4EACHello"), (std::vector<std::string>{"\u5317\u4EACHello"}));
  EXPECT_EQ(split(pt, "Hello, world!\n"),
            (std::vector<std::string>{"Hello", ",", " world", "!\n"}));
}

TEST(PreTokenizer, KimiK2MakesHanRunsPiecesOfTheirOwn) {
  const auto pt = PreTokenizer::for_name("kimi-k2");
  // 北京 Hello 世界: Han runs and Latin words part.
  EXPECT_EQ(split(pt, "\u5317\u4EACHello\u4E16\u754C"),
            (std::vector<std::string>{"\u5317\u4EAC", "Hello", "\u4E16\u754C"}));
  // " 你好,世界!": a space does not lead a Han run (o200k would give " 你好", ",世界").
  EXPECT_EQ(split(pt, " \u4F60\u597D,\u4E16\u754C!"),
            (std::vector<std::string>{" ", "\u4F60\u597D", ",", "\u4E16\u754C", "!"}));
  // 我有3个apple's和12345: digits in threes, the contraction on its word, 个 apart.
  EXPECT_EQ(
      split(pt,
            "\u6211\u6709"
            "3\u4E2A"
            "apple's\u548C"
            "12345"),
      (std::vector<std::string>{"\u6211\u6709", "3", "\u4E2A", "apple's", "\u548C", "123", "45"}));
  // Kana are not Han: カタカナ 漢字 ひらがな are three pieces.
  EXPECT_EQ(split(pt, "\u30AB\u30BF\u30AB\u30CA\u6F22\u5B57\u3072\u3089\u304C\u306A"),
            (std::vector<std::string>{"\u30AB\u30BF\u30AB\u30CA", "\u6F22\u5B57",
                                      "\u3072\u3089\u304C\u306A"}));
  // 々 (Lm) and 〇 (Nl) are of the Han script, so they join the Han run. llama.cpp's
  // hand-written kimi-k2 splitter, which tests CJK ideograph blocks, would not.
  EXPECT_EQ(split(pt, "\u3005\u3007\u3055\u304F\u3089"),
            (std::vector<std::string>{"\u3005\u3007", "\u3055\u304F\u3089"}));
  // Upper/lower split as o200k (llama.cpp's splitter keeps "getUserName" whole).
  EXPECT_EQ(split(pt, "getUserName I'M you're"),
            (std::vector<std::string>{"get", "User", "Name", " I'M", " you're"}));
  EXPECT_EQ(split(pt, "\u4E2D\u6587\n\nabc"),
            (std::vector<std::string>{"\u4E2D\u6587", "\n\n", "abc"}));
}

// o200k's word rule is two overlapping classes in a row ([Lu Lt Lm Lo M]*[Ll Lm Lo M]+),
// and kimi-k2 adds a lookahead per character: long runs of one kind must still split
// in about linear time (the JIT's stack gives out on them and the interpreter takes over).
TEST(PreTokenizer, LongRunsOfOneClassSplitQuickly) {
  const std::string upper(1 << 20, 'A');
  std::string han, khmer, spaces(1 << 20, ' ');
  while (han.size() < (1 << 20)) han += "\u4E2D";
  while (khmer.size() < (1 << 20)) khmer += "\u1780\u17B6";
  for (const char* name : {"gpt-4o", "kimi-k2"}) {
    const auto pt = PreTokenizer::for_name(name);
    for (const std::string* text :
         std::initializer_list<const std::string*>{&upper, &han, &khmer, &spaces}) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::string_view> pieces, scratch;
      pt.split(*text, pieces, scratch);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      size_t covered = 0;
      for (std::string_view piece : pieces) covered += piece.size();
      EXPECT_EQ(covered, text->size()) << name;
      EXPECT_LT(seconds, 10.0) << name << ": 1 MiB should take well under a second";
    }
  }
}

TEST(PreTokenizer, SequencesApplyEachExpressionToEachPiece) {
  // falcon: punctuation runs first, then GPT-2's expression inside the rest, then digits
  // in threes inside those pieces.
  const auto pt = PreTokenizer::for_name("falcon");
  EXPECT_EQ(split(pt, "a, 12345"), (std::vector<std::string>{"a", ",", " ", "123", "45"}));
}

TEST(PreTokenizer, PiecesCoverArbitraryBytesExactly) {
  const std::string text = "ok \xFF\xFE bad \xE2\x82 mid\xF0\x9F\x98\x80 end";
  for (const char* name : {"llama3", "qwen2", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon",
                           "starcoder", "refact", "default", "deepseek-v3", "bloom", "viking",
                           "chatglm-bpe", "gpt-4o", "kimi-k2"}) {
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
