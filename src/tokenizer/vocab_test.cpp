#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace herd::tokenizer {
namespace {

// The error message of building spec, or "" when it builds.
std::string build_error(const VocabSpec& spec) {
  try {
    Vocab::build(spec);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

VocabSpec spm_spec(const std::vector<std::string_view>& tokens) {
  VocabSpec spec;
  spec.model = "llama";
  spec.tokens = tokens;
  return spec;
}

TEST(Vocab, BuildsASmallSpmVocabularyWithDefaults) {
  const std::vector<std::string_view> tokens = {"<unk>", "<s>", "</s>", "<0x41>",
                                                "\xE2\x96\x81"
                                                "a"};
  VocabSpec spec = spm_spec(tokens);
  spec.token_types = {2, 3, 3, 6, 1};
  const Vocab v = Vocab::build(spec);
  EXPECT_EQ(v.kind(), VocabKind::kSpm);
  EXPECT_EQ(v.n_tokens(), 5);
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), 2);
  EXPECT_EQ(v.unk(), 0);
  EXPECT_EQ(v.prefix_token(), 1);
  EXPECT_FALSE(v.suffix_token());
  EXPECT_TRUE(v.add_space_prefix());
  EXPECT_EQ(v.byte_token('A'), 3);
  EXPECT_EQ(v.byte_token('B'), -1);
  EXPECT_EQ(v.find("\xE2\x96\x81"
                   "a"),
            4);
  EXPECT_FALSE(v.find("<s>")) << "control tokens are not produced by plain text";
  EXPECT_TRUE(v.is_eog(2));
}

TEST(Vocab, TheFileFlagsOverrideTheDefaults) {
  const std::vector<std::string_view> tokens = {"<unk>", "<s>", "</s>", "a"};
  VocabSpec spec = spm_spec(tokens);
  spec.add_bos = false;
  spec.add_eos = true;
  spec.add_space_prefix = false;
  const Vocab v = Vocab::build(spec);
  EXPECT_FALSE(v.prefix_token());
  EXPECT_EQ(v.suffix_token(), 2);
  EXPECT_FALSE(v.add_space_prefix());
}

TEST(Vocab, BpeMergesBecomeTokenPairs) {
  const std::vector<std::string_view> tokens = {"a", "b", "ab", "abb"};
  const std::vector<std::string_view> merges = {"a b", "ab b", "x y"};
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt-2";
  spec.tokens = tokens;
  spec.merges = merges;
  spec.has_merges = true;
  const Vocab v = Vocab::build(spec);
  ASSERT_NE(v.merge(0, 1), nullptr);
  EXPECT_EQ(v.merge(0, 1)->rank, 0);
  EXPECT_EQ(v.merge(0, 1)->result, 2);
  EXPECT_EQ(v.merge(2, 1)->result, 3);
  EXPECT_EQ(v.merge(1, 0), nullptr);
  EXPECT_EQ(v.n_merges(), 2u) << "a merge of unknown tokens is ignored";
  EXPECT_EQ(v.byte_token('a'), 0);
  EXPECT_FALSE(v.prefix_token()) << "gpt-2 adds no BOS unless the file says so";
}

// End of generation by token text, for files that name only EOS.
TEST(Vocab, ChatEndTokensAreFoundByText) {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = "kimi-k2";
  spec.has_merges = true;
  // Kimi K2: [EOS] and [EOT] end generation too; its chat turns close with <|im_end|>,
  // which is preferred as the end of a turn.
  const std::vector<std::string_view> kimi = {"a", "[BOS]", "[EOS]", "[EOT]", "<|im_end|>"};
  spec.tokens = kimi;
  spec.token_types = {1, 3, 3, 3, 3};
  const Vocab k = Vocab::build(spec);
  EXPECT_EQ(k.eot(), 4);
  EXPECT_EQ(k.eog_ids(), (std::vector<int32_t>{2, 3, 4}));

  // Harmony (<|return|> and <|call|> both present): <|end|> closes a message, not the
  // turn, even when the file calls it EOS. Without them <|end|> ends generation (Phi-3).
  spec.pre = "gpt-4o";
  const std::vector<std::string_view> harmony = {"a", "<|return|>", "<|end|>", "<|call|>"};
  spec.tokens = harmony;
  spec.token_types = {1, 3, 3, 3};
  spec.eos = 2;
  const Vocab h = Vocab::build(spec);
  EXPECT_EQ(h.eog_ids(), (std::vector<int32_t>{1, 3}));
  EXPECT_FALSE(h.eot());
  const std::vector<std::string_view> phi = {"a", "<|end|>"};
  spec.tokens = phi;
  spec.token_types = {1, 3};
  spec.eos = std::nullopt;
  const Vocab p = Vocab::build(spec);
  EXPECT_EQ(p.eog_ids(), (std::vector<int32_t>{1}));
  EXPECT_EQ(p.eot(), 1);

  // Gemma 4: a turn ends with <turn|> (its end of turn), and a tool call with
  // <|tool_response> (the tool answers next); <|turn> opens a turn and <|tool_call> a call.
  const std::vector<std::string_view> gemma4 = {"a",       "<eos>",        "<|turn>",
                                                "<turn|>", "<|tool_call>", "<|tool_response>"};
  spec.tokens = gemma4;
  spec.token_types = {1, 3, 3, 3, 3, 3};
  spec.eos = 1;
  const Vocab g = Vocab::build(spec);
  EXPECT_EQ(g.eog_ids(), (std::vector<int32_t>{1, 3, 5}));
  EXPECT_EQ(g.eot(), 3);
}

TEST(Vocab, MalformedSpecsAreClearErrors) {
  const std::vector<std::string_view> tokens = {"a", "b"};
  VocabSpec unknown_model = spm_spec(tokens);
  unknown_model.model = "t9";
  EXPECT_NE(build_error(unknown_model).find("unknown tokenizer model 't9'"), std::string::npos);

  VocabSpec empty = spm_spec({});
  EXPECT_NE(build_error(empty).find("no tokens"), std::string::npos);

  VocabSpec scores = spm_spec(tokens);
  scores.scores = {0.0f};
  EXPECT_NE(build_error(scores).find("tokenizer.ggml.scores has 1 entries but "
                                     "tokenizer.ggml.tokens has 2"),
            std::string::npos);

  VocabSpec types = spm_spec(tokens);
  types.token_types = {1, 1, 1};
  EXPECT_NE(build_error(types).find("tokenizer.ggml.token_type has 3 entries"), std::string::npos);

  VocabSpec no_merges = spm_spec(tokens);
  no_merges.model = "gpt2";
  EXPECT_NE(build_error(no_merges).find("needs tokenizer.ggml.merges"), std::string::npos);

  const std::vector<std::string_view> bad_merges = {"ab"};
  VocabSpec bad_merge = no_merges;
  bad_merge.merges = bad_merges;
  bad_merge.has_merges = true;
  EXPECT_NE(build_error(bad_merge).find("merge 0 'ab' is not of the form"), std::string::npos);

  VocabSpec no_bos = spm_spec(tokens);
  no_bos.model = "gpt2";
  no_bos.has_merges = true;
  no_bos.add_bos = true;
  EXPECT_NE(build_error(no_bos).find("no BOS token id"), std::string::npos);
}

// ---- through GGUF files ----

class VocabFileTest : public ::testing::Test {
 protected:
  std::string write(const gguf::Writer& writer) {
    const std::string path = ::testing::TempDir() + "herd_vocab_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                             ".gguf";
    writer.write(path, [](size_t, std::span<uint8_t>) {});
    return path;
  }
  std::string load_error(const gguf::Writer& writer) {
    const std::string path = write(writer);
    try {
      Vocab::from_gguf(gguf::File::open(path));
      std::filesystem::remove(path);
      return "";
    } catch (const Error& e) {
      std::filesystem::remove(path);
      return e.what();
    }
  }
};

TEST_F(VocabFileTest, MissingTokensArray) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  const std::string error = load_error(w);
  EXPECT_NE(error.find("[tokenizer]"), std::string::npos) << error;
  EXPECT_NE(error.find("no tokenizer.ggml.tokens"), std::string::npos) << error;
}

TEST_F(VocabFileTest, MissingModel) {
  gguf::Writer w;
  w.set_string_array("tokenizer.ggml.tokens", {"a"});
  EXPECT_NE(load_error(w).find("no tokenizer.ggml.model"), std::string::npos);
}

TEST_F(VocabFileTest, UnknownModelName) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "rwkv-9");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  const std::string error = load_error(w);
  EXPECT_NE(error.find("unknown tokenizer model 'rwkv-9'"), std::string::npos) << error;
  EXPECT_NE(error.find("herd_vocab_test_UnknownModelName.gguf"), std::string::npos) << error;
}

TEST_F(VocabFileTest, MismatchedLengths) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  const std::vector<float> scores = {0, 0};
  w.set_f32_array("tokenizer.ggml.scores", scores);
  EXPECT_NE(load_error(w).find("scores has 2 entries but tokenizer.ggml.tokens has 3"),
            std::string::npos);
}

TEST_F(VocabFileTest, UnknownPreTokenizer) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "mystery");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  const std::string path = write(w);
  const gguf::File file = gguf::File::open(path);
  EXPECT_NO_THROW(Vocab::from_gguf(file)) << "the table itself is fine";
  try {
    Tokenizer::from_gguf(file);
    ADD_FAILURE() << "an unknown pre-tokenizer must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown pre-tokenizer 'mystery'"), std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_F(VocabFileTest, TokensOfTheWrongType) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_u32("tokenizer.ggml.tokens", 7);
  const std::string error = load_error(w);
  EXPECT_NE(error.find("tokenizer.ggml.tokens"), std::string::npos) << error;
}

}  // namespace
}  // namespace herd::tokenizer
