// The reference tokenizer vectors: every string of every vocabulary in ../shared must
// encode (add_special=false, parse_special=false) to exactly the ids the reference
// produced. The file format is described in ../shared/vocab/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/word_piece.h"
#include "util/mapped_file.h"

namespace herd::tokenizer {
namespace {

struct VectorSet {
  const char* name;
  const char* gguf;
  const char* inputs;
  const char* outputs;
};

constexpr VectorSet kSets[] = {
#define HERD_VOCAB(n)                                                                        \
  VectorSet {                                                                                \
    n, "../shared/vocab/ggml-vocab-" n ".gguf", "../shared/vocab/ggml-vocab-" n ".gguf.inp", \
        "../shared/vocab/ggml-vocab-" n ".gguf.out"                                          \
  }
    HERD_VOCAB("bert-bge"),
    HERD_VOCAB("deepseek-coder"),
    HERD_VOCAB("deepseek-llm"),
    HERD_VOCAB("deepseek-v3"),
    HERD_VOCAB("falcon"),
    HERD_VOCAB("gpt-2"),
    HERD_VOCAB("gpt-4o"),
    HERD_VOCAB("llama-bpe"),
    HERD_VOCAB("llama-spm"),
    HERD_VOCAB("qwen2"),
    HERD_VOCAB("refact"),
    HERD_VOCAB("starcoder"),
#undef HERD_VOCAB
    VectorSet{"model-spm", "../shared/models/llama-f16.gguf", "../shared/models/vocab-spm.inp",
              "../shared/models/vocab-spm.out"},
    VectorSet{"model-bpe", "../shared/models/qwen2-f32.gguf", "../shared/models/vocab-bpe.inp",
              "../shared/models/vocab-bpe.out"},
};

// Strings separated by "\n__ggml_vocab_test__\n"; text after the last separator, if
// any, is one more string.
std::vector<std::string> parse_inputs(const std::string& data) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t next = data.find(separator, pos);
    if (next == std::string::npos) {
      out.push_back(data.substr(pos));
      break;
    }
    out.push_back(data.substr(pos, next - pos));
    pos = next + separator.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> parse_outputs(const std::string& data) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(data);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::vector<int32_t> ids;
    long long id = 0;
    while (fields >> id) ids.push_back(static_cast<int32_t>(id));
    out.push_back(std::move(ids));
  }
  return out;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

class VectorsTest : public ::testing::TestWithParam<VectorSet> {};

TEST_P(VectorsTest, EncodesEveryStringLikeTheReference) {
  const VectorSet& set = GetParam();
  const auto inputs = parse_inputs(read_file(set.inputs));
  const auto expected = parse_outputs(read_file(set.outputs));
  ASSERT_EQ(inputs.size(), expected.size()) << set.inputs;
  ASSERT_GT(inputs.size(), 0u);

  const Tokenizer tok = Tokenizer::from_gguf(gguf::File::open(set.gguf));
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto actual = tok.encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    if (actual != expected[i]) {
      ++failures;
      ADD_FAILURE() << set.name << " string " << i << " \"" << escaped(inputs[i]) << "\"\n"
                    << "  expected: " << join(expected[i]) << "\n"
                    << "  actual:   " << join(actual);
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << inputs.size() << " strings differ";
}

TEST_P(VectorsTest, DecodeInvertsEncode) {
  const VectorSet& set = GetParam();
  const auto inputs = parse_inputs(read_file(set.inputs));
  const Tokenizer tok = Tokenizer::from_gguf(gguf::File::open(set.gguf));
  if (tok.vocab().kind() == VocabKind::kWordPiece) {
    // Decoding is lossy (case, accents, spacing around punctuation), so compare the words
    // the normalizer sees, for every input that needed no [UNK].
    int compared = 0;
    for (const std::string& input : inputs) {
      const auto ids = tok.encode(input, false, false);
      if (std::find(ids.begin(), ids.end(), *tok.vocab().unk()) != ids.end()) continue;
      ++compared;
      EXPECT_EQ(bert_pre_tokenize(tok.decode(ids)), bert_pre_tokenize(input))
          << set.name << " \"" << escaped(input) << "\"";
    }
    EXPECT_GT(compared, 30);
    return;
  }
  for (const std::string& input : inputs) {
    // SentencePiece: decoding drops the one leading space that encoding added; a text
    // that began with its own space keeps it (encoding made it two).
    EXPECT_EQ(tok.decode(tok.encode(input, false, false)), input)
        << set.name << " \"" << escaped(input) << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(AllVocabularies, VectorsTest, ::testing::ValuesIn(kSets),
                         [](const ::testing::TestParamInfo<VectorSet>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace herd::tokenizer
