// The cost of holding a reply to a JSON schema, per generated token, on Qwen 2's 151k-token
// vocabulary (../shared/vocab, run from the repository root):
//   Allows     the common step: the sampler's first draw is checked (one token's bytes)
//   Mask/...   the rarer step: the draw was refused, every allowed token is found by one
//              walk of the vocabulary's trie, in three states of the reply
//   Vocabulary building the per-tokenizer tables (once per server)
//   build/bench/json_constraint_bench
#include <benchmark/benchmark.h>

#include "gguf/reader.h"
#include "server/json_token_filter.h"

namespace {

using herd::server::ConstraintVocabulary;
using herd::server::JsonGrammar;
using herd::server::JsonTokenFilter;
using json = nlohmann::ordered_json;

const herd::tokenizer::Tokenizer& qwen2() {
  static const herd::tokenizer::Tokenizer tok = [] {
    herd::gguf::File f = herd::gguf::File::open("../shared/vocab/ggml-vocab-qwen2.gguf");
    return herd::tokenizer::Tokenizer::from_gguf(f);
  }();
  return tok;
}

const ConstraintVocabulary& vocabulary() {
  static const ConstraintVocabulary v(qwen2(), false);
  return v;
}

std::shared_ptr<const JsonGrammar> grammar() {
  auto g = std::make_shared<JsonGrammar>();
  g->add_start("", g->add_schema(json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name", "age", "tags"], "additionalProperties": false})")));
  return g;
}

JsonTokenFilter filter_after(const std::string& text) {
  JsonTokenFilter f(grammar(), vocabulary());
  for (int32_t t : qwen2().encode(text, false, false)) f.accept(t);
  return f;
}

void BM_Allows(benchmark::State& state) {
  JsonTokenFilter f = filter_after(R"({"name": "Jo)");
  const int32_t token = qwen2().encode("hn", false, false)[0];
  for (auto _ : state) benchmark::DoNotOptimize(f.allows(token));
}
BENCHMARK(BM_Allows);

void mask(benchmark::State& state, const std::string& text) {
  JsonTokenFilter f = filter_after(text);
  std::vector<uint8_t> allowed(static_cast<size_t>(qwen2().n_vocab()));
  for (auto _ : state) {
    std::fill(allowed.begin(), allowed.end(), 0);
    f.allowed_tokens(allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
}
void BM_Mask_ObjectStart(benchmark::State& state) {
  mask(state, "");
}
void BM_Mask_InString(benchmark::State& state) {
  mask(state, R"({"name": "Jo)");
}
void BM_Mask_AfterNumber(benchmark::State& state) {
  mask(state, R"({"name": "Jo", "age": 4)");
}
BENCHMARK(BM_Mask_ObjectStart)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mask_InString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mask_AfterNumber)->Unit(benchmark::kMillisecond);

void BM_Vocabulary(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ConstraintVocabulary(qwen2(), false));
}
BENCHMARK(BM_Vocabulary)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
