// The token filter on real vocabularies (../shared/vocab): the trie's allowed set equals
// asking about every token, and random logits held to a schema decode to JSON that
// matches it, with byte-level BPE (Qwen 2) and SentencePiece (Llama, whose first piece
// loses its leading space).
#include "server/json_token_filter.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/sampler.h"
#include "gguf/reader.h"
#include "tokenizer/stream_decoder.h"

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

const tokenizer::Tokenizer& vocabulary(const std::string& name) {
  static std::map<std::string, tokenizer::Tokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) {
    gguf::File f = gguf::File::open("../shared/vocab/ggml-vocab-" + name + ".gguf");
    it = loaded.emplace(name, tokenizer::Tokenizer::from_gguf(f)).first;
  }
  return it->second;
}

std::shared_ptr<const JsonGrammar> grammar_of(const std::string& schema) {
  auto g = std::make_shared<JsonGrammar>();
  g->add_start("", g->add_schema(json::parse(schema)));
  return g;
}

constexpr const char* kPerson = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
    "required": ["name", "age", "tags"], "additionalProperties": false})";

TEST(JsonTokenFilter, TheTrieAgreesWithAskingEveryToken) {
  const tokenizer::Tokenizer& tok = vocabulary("qwen2");
  const ConstraintVocabulary vocab(tok, false);
  const auto grammar = grammar_of(kPerson);
  for (const std::string& text :
       {std::string(""), std::string(R"({"na)"), std::string(R"({"name": "J)"),
        std::string(R"({"name": "x", )"), std::string(R"({"name": "x", "age": 1)")}) {
    JsonTokenFilter filter(grammar, vocab);
    for (int32_t t : tok.encode(text, false, false)) {
      ASSERT_TRUE(filter.allows(t)) << text;
      filter.accept(t);
    }
    std::vector<uint8_t> mask(static_cast<size_t>(tok.n_vocab()), 0);
    filter.allowed_tokens(mask);
    size_t n_allowed = 0;
    for (int32_t t = 0; t < tok.n_vocab(); ++t) {
      ASSERT_EQ(mask[static_cast<size_t>(t)] != 0, filter.allows(t)) << text << " token " << t;
      n_allowed += mask[static_cast<size_t>(t)];
    }
    EXPECT_GT(n_allowed, 0u) << text;
  }
}

// Every field bounded (no free string: random logits would rarely close one), so that a
// random model's reply is whole within the test's steps.
constexpr const char* kBounded = R"({"type": "object", "properties": {
    "name": {"enum": ["Ann", "Bob"]}, "age": {"type": "integer"}, "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
    "required": ["name", "age", "ok", "tags"], "additionalProperties": false})";

// Random logits (a model that knows nothing of JSON) held to kBounded, greedy and sampled.
void random_model_writes_schema_json(const std::string& name) {
  const tokenizer::Tokenizer& tok = vocabulary(name);
  const ConstraintVocabulary vocab(tok, false);
  const auto grammar = grammar_of(kBounded);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  for (float temperature : {0.0f, 1.0f}) {
    engine::SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    engine::Sampler sampler(p);
    JsonTokenFilter filter(grammar, vocab);
    tokenizer::StreamDecoder decoder(tok);
    std::string text;
    for (int step = 0; step < 400 && !filter.complete(); ++step) {
      for (float& l : logits) l = noise(rng);
      const int32_t t = sampler.sample(logits, &filter);
      ASSERT_GE(t, 0);
      if (tok.is_eog(t)) break;
      filter.accept(t);
      text += decoder.push(t);
    }
    text += decoder.flush();
    ASSERT_TRUE(filter.complete()) << name << ": " << text;
    const json reply = json::parse(text);
    EXPECT_EQ(reply.size(), 4u) << text;
    EXPECT_TRUE(reply["name"] == "Ann" || reply["name"] == "Bob") << text;
    EXPECT_TRUE(reply["ok"].is_boolean()) << text;
    EXPECT_TRUE(reply["age"].is_number_integer()) << text;
    EXPECT_LE(reply["tags"].size(), 3u) << text;
  }
}

TEST(JsonTokenFilter, RandomLogitsWriteMatchingJsonByteLevelBpe) {
  random_model_writes_schema_json("qwen2");
}
TEST(JsonTokenFilter, RandomLogitsWriteMatchingJsonSentencePiece) {
  random_model_writes_schema_json("llama-spm");
}

}  // namespace
}  // namespace herd::server
