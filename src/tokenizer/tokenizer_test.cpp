#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <random>
#include <thread>
#include <variant>

#include "gguf/reader.h"
#include "util/error.h"

namespace herd::tokenizer {
namespace {

// The small models' tokenizers (see ../shared/models/README.md): SPM with byte
// fallback, and Qwen2 byte-level BPE with <|endoftext|> 381, <|im_start|> 382,
// <|im_end|> 383.
Tokenizer load(const char* path) {
  return Tokenizer::from_gguf(gguf::File::open(path));
}

const Tokenizer& spm() {
  static const Tokenizer t = load("../shared/models/llama-f16.gguf");
  return t;
}
const Tokenizer& bpe() {
  static const Tokenizer t = load("../shared/models/qwen2-f32.gguf");
  return t;
}

using Ids = std::vector<int32_t>;

TEST(Tokenizer, SpmFollowsTheReadmeExample) {
  EXPECT_EQ(spm().encode("Hello world", false, false),
            (Ids{259, 75, 260, 329, 262, 367, 324, 268, 269}));
  EXPECT_EQ(spm().decode(Ids{259, 75, 260, 329, 262, 367, 324, 268, 269}), "Hello world");
}

TEST(Tokenizer, AddSpecialFollowsTheFile) {
  // SPM: BOS (the file's add_bos_token), nothing at the end.
  const Ids spm_ids = spm().encode("Hello", true, true);
  ASSERT_FALSE(spm_ids.empty());
  EXPECT_EQ(spm_ids.front(), 1);
  EXPECT_NE(spm_ids.back(), 2);
  EXPECT_EQ(spm().encode("", true, true), Ids{1});
  EXPECT_TRUE(spm().encode("", false, false).empty());
  // Qwen2: add_bos_token is false, so nothing is added.
  EXPECT_EQ(bpe().encode("Hello", true, true), bpe().encode("Hello", false, false));
  // Llama 3: BOS 128000.
  const Tokenizer llama3 = load("../shared/vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_EQ(llama3.encode("Hello", true, true).front(), 128000);
  // BERT: [CLS] ... [SEP].
  const Tokenizer bert = load("../shared/vocab/ggml-vocab-bert-bge.gguf");
  EXPECT_EQ(bert.encode("Hello", true, true), (Ids{101, 7592, 102}));
  // No clean-up of spaces before punctuation (Hugging Face's clean_up_tokenization_spaces).
  EXPECT_EQ(bert.decode(Ids{101, 7592, 1010, 2088, 102}), "hello , world");
}

TEST(Tokenizer, ParsesSpecialTokensOnlyWhenAsked) {
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const Ids parsed = bpe().encode(text, false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 382);
  EXPECT_EQ(parsed.back(), 383);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 382), 1);

  const Ids plain = bpe().encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 382), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 383), 0);
  EXPECT_EQ(bpe().decode(plain), text) << "as plain text it round-trips";

  // Control tokens vanish from decoded text unless asked for.
  EXPECT_EQ(bpe().decode(parsed), "user\nhi");
  EXPECT_EQ(bpe().decode(parsed, /*render_special=*/true), text);
}

TEST(Tokenizer, SpmPutsTheSpacePrefixAfterSpecialTokens) {
  const Ids ids = spm().encode("<s>Hello</s>", false, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(Ids(ids.begin() + 1, ids.end() - 1), spm().encode("Hello", false, false));
}

TEST(Tokenizer, UserDefinedTokensAreAlwaysMatched) {
  // DeepSeek Coder has user-defined tokens such as 'ü' (32009): matched even when
  // special tokens are not parsed, as the reference does.
  const Tokenizer ds = load("../shared/vocab/ggml-vocab-deepseek-coder.gguf");
  const Ids ids = ds.encode("F\xC3\xBChrer", false, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 32009), 1);
  EXPECT_EQ(ds.decode(ids), "F\xC3\xBChrer");
}

TEST(Tokenizer, EndOfGenerationAndControlQueries) {
  EXPECT_TRUE(bpe().is_eog(383));  // <|im_end|>, the EOS
  EXPECT_TRUE(bpe().is_eog(381));  // <|endoftext|>
  EXPECT_FALSE(bpe().is_eog(382));
  EXPECT_FALSE(bpe().is_eog(100));
  EXPECT_TRUE(bpe().is_control(382));
  EXPECT_FALSE(bpe().is_control(100));
  EXPECT_EQ(bpe().eos(), 383);
  EXPECT_EQ(bpe().token_text(382), "<|im_start|>");
  EXPECT_EQ(spm().bos(), 1);
  EXPECT_EQ(spm().n_vocab(), 384);
}

// Ids of the special tokens of ../shared/vocab/ggml-vocab-gpt-4o.gguf (gpt-oss's
// o200k_harmony) and ggml-vocab-deepseek-v3.gguf, as listed in their token tables.
constexpr int32_t kHarmonyEndOfText = 199999, kHarmonyReturn = 200002, kHarmonyChannel = 200005,
                  kHarmonyStart = 200006, kHarmonyEnd = 200007, kHarmonyMessage = 200008,
                  kHarmonyCall = 200012;
constexpr int32_t kDeepseekBos = 0, kDeepseekEos = 1, kDeepseekUser = 128803,
                  kDeepseekAssistant = 128804;

// encode(text, false, false) of each plain part, with the given ids between them.
Ids interleave(const Tokenizer& tok,
               std::initializer_list<std::variant<int32_t, const char*>> parts) {
  Ids out;
  for (const auto& part : parts) {
    if (const auto* id = std::get_if<int32_t>(&part)) {
      out.push_back(*id);
    } else {
      const Ids plain = tok.encode(std::get<const char*>(part), false, false);
      out.insert(out.end(), plain.begin(), plain.end());
    }
  }
  return out;
}

TEST(Tokenizer, HarmonyMarkersAreSingleTokens) {
  const Tokenizer tok = load("../shared/vocab/ggml-vocab-gpt-4o.gguf");
  const std::string text = "<|start|>assistant<|channel|>final<|message|>hi<|end|>";
  // The file asks for no BOS, so add_special changes nothing.
  const Ids expected = interleave(tok, {kHarmonyStart, "assistant", kHarmonyChannel, "final",
                                        kHarmonyMessage, "hi", kHarmonyEnd});
  // "assistant", "final" and "hi" are single tokens of the table.
  EXPECT_EQ(expected, (Ids{kHarmonyStart, 173781, kHarmonyChannel, 17196, kHarmonyMessage, 3686,
                           kHarmonyEnd}));
  EXPECT_EQ(tok.encode(text, true, true), expected);
  EXPECT_EQ(tok.encode(text, false, true), expected);
  EXPECT_EQ(tok.decode(expected, /*render_special=*/true), text);
  EXPECT_EQ(tok.decode(expected), "assistantfinalhi");
  // Not parsed: the markers are spelled out like any text and none of their ids appears.
  const Ids plain = tok.encode(text, false, false);
  for (int32_t id : {kHarmonyStart, kHarmonyChannel, kHarmonyMessage, kHarmonyEnd}) {
    EXPECT_EQ(std::count(plain.begin(), plain.end(), id), 0) << id;
  }
  EXPECT_EQ(tok.decode(plain), text);
  EXPECT_EQ(tok.encode("<|return|><|call|><|constrain|><|endofprompt|>", false, true),
            (Ids{kHarmonyReturn, kHarmonyCall, 200003, 200018}));
}

TEST(Tokenizer, HarmonyEndsGenerationAtReturnAndCallNotAtEnd) {
  const Tokenizer tok = load("../shared/vocab/ggml-vocab-gpt-4o.gguf");
  EXPECT_EQ(tok.eos(), kHarmonyReturn);
  EXPECT_TRUE(tok.is_eog(kHarmonyReturn));
  EXPECT_TRUE(tok.is_eog(kHarmonyCall));
  EXPECT_TRUE(tok.is_eog(kHarmonyEndOfText));
  // <|end|> closes the analysis message; the final answer comes after it.
  EXPECT_FALSE(tok.is_eog(kHarmonyEnd));
  EXPECT_NE(tok.eot(), kHarmonyEnd);
  EXPECT_FALSE(tok.is_eog(kHarmonyStart));
  EXPECT_FALSE(tok.is_eog(kHarmonyChannel));
}

TEST(Tokenizer, DeepseekV3FullWidthSpecialTokens) {
  const Tokenizer tok = load("../shared/vocab/ggml-vocab-deepseek-v3.gguf");
  // U+FF5C '｜' and U+2581 '▁' inside the markers.
  const std::string bos = "<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>";
  const std::string user = "<\uFF5CUser\uFF5C>";
  const std::string assistant = "<\uFF5CAssistant\uFF5C>";
  const std::string eos = "<\uFF5Cend\u2581of\u2581sentence\uFF5C>";
  const std::string text = bos + user + "Hello" + assistant + "Hi" + eos;
  const Ids expected = interleave(
      tok, {kDeepseekBos, kDeepseekUser, "Hello", kDeepseekAssistant, "Hi", kDeepseekEos});
  EXPECT_EQ(expected, (Ids{kDeepseekBos, kDeepseekUser, 19923, kDeepseekAssistant, 23166,
                           kDeepseekEos}));  // "Hello" and "Hi" are single tokens
  EXPECT_EQ(tok.encode(text, false, true), expected);
  EXPECT_EQ(tok.decode(expected, /*render_special=*/true), text);
  // The file's add_bos_token puts BOS before a plain text.
  EXPECT_EQ(tok.encode("Hello", true, true), interleave(tok, {kDeepseekBos, "Hello"}));
  const Ids plain = tok.encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kDeepseekUser), 0);
  EXPECT_EQ(tok.decode(plain), text);
  EXPECT_EQ(tok.encode("<\uFF5Ctool\u2581calls\u2581begin\uFF5C>", false, true), Ids{128806});
  EXPECT_TRUE(tok.is_eog(kDeepseekEos));
  EXPECT_EQ(tok.eot(), kDeepseekEos);
  EXPECT_FALSE(tok.is_eog(kDeepseekAssistant));
}

TEST(Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  EXPECT_THROW(bpe().decode(Ids{5, 384}), Error);
  EXPECT_THROW(bpe().decode(Ids{-1}), Error);
}

TEST(Tokenizer, ArbitraryBytesRoundTrip) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = static_cast<char>(rng());
    EXPECT_EQ(bpe().decode(bpe().encode(text, false, false)), text);
    // SPM turns nothing into '▁' but the space it adds; byte fallback covers the rest.
    if (!text.empty() && text[0] != ' ') {
      EXPECT_EQ(spm().decode(spm().encode(text, false, false)), text);
    }
  }
}

TEST(Tokenizer, LongInputsEncodeInRoughlyLinearTime) {
  std::string text;
  while (text.size() < 400000)
    text += "The quick brown fox, 12345 jumps: caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD!\n";
  const std::string word(50000, 'a');  // one long word: many merges in one heap
  for (const Tokenizer* t : {&spm(), &bpe()}) {
    const auto start = std::chrono::steady_clock::now();
    const Ids ids = t->encode(text, false, false);
    const Ids long_word = t->encode(word, false, false);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(t->decode(ids), text);
    EXPECT_EQ(t->decode(long_word), word);
    EXPECT_LT(seconds, 10.0) << "400 kB should take well under a second";
  }
}

TEST(Tokenizer, LoadsLlama3QuicklyAndEncodesFromManyThreads) {
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer t = load("../shared/vocab/ggml-vocab-llama-bpe.gguf");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("load_seconds", std::to_string(seconds));
  EXPECT_LT(seconds, 5.0) << "128k tokens + 280k merges should load in well under a second";
  EXPECT_EQ(t.vocab().n_merges(), 280147u);

  const std::string text = "Hello, world! I'm testing 12345 threads.";
  const Ids expected = t.encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < 200; ++n) ok[i] += t.encode(text, true, true) == expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ok[i], 200);
}

TEST(Tokenizer, TheFileCanBeClosedAfterLoading) {
  std::optional<Tokenizer> t;
  {
    const gguf::File file = gguf::File::open("../shared/models/qwen2-f32.gguf");
    t.emplace(Tokenizer::from_gguf(file));
  }
  EXPECT_EQ(t->decode(t->encode("still works", false, false)), "still works");
  EXPECT_EQ(t->token_text(382), "<|im_start|>");
}

}  // namespace
}  // namespace herd::tokenizer
