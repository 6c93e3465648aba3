// The scheduler's tests' fixtures: a tiny synthetic model for its tokenizer, a fake runner
// whose next token depends on everything in the slot (so a wrongly reused prefix changes the
// output), and helpers that submit requests and step until they finish.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "engine/scheduler.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace herd::engine::scheduler_test {

// A tokenizer for StreamDecoder and EOG checks: the built-in vocabulary of a tiny model.
struct TinyModel {
  std::string path;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  TinyModel() {
    SynthOptions o;
    o.arch = "qwen3";
    o.type = "f32";
    // One file per process: ctest runs the tests of this binary in parallel processes.
    o.out_path = ::testing::TempDir() + "/server_tiny_" + std::to_string(getpid()) + ".gguf";
    o.n_embd = 64;
    o.n_layer = 2;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.n_ff = 128;
    o.threads = 2;
    synthesize(o);
    path = o.out_path;
    tok = std::make_unique<tokenizer::Tokenizer>(
        tokenizer::Tokenizer::from_gguf(gguf::File::open(path)));
  }
  ~TinyModel() { std::filesystem::remove(path); }  // at exit: every test is done with it
};
inline TinyModel& tiny() {
  static TinyModel m;
  return m;
}

// The fake KV cache is the tokens themselves: the next token is a hash of every token at
// positions [0, pos] of the slot, mapped onto single-letter tokens; a slot whose last
// token is `eog_trigger` is answered with EOS.
class FakeRunner : public engine::ModelRunner {
 public:
  FakeRunner(const tokenizer::Tokenizer& tok, int64_t n_seq, int64_t n_ctx)
      : file_(gguf::File::open(tiny().path)),
        info_(read_model_info(file_)),
        n_ctx_(n_ctx),
        n_seq_(n_seq),
        slots_(static_cast<size_t>(n_seq)) {
    hp_.n_vocab = tok.n_vocab();
    for (char c = 'a'; c <= 'z'; ++c) {
      auto ids = tok.encode(std::string(1, c), false, false);
      letters_.push_back(ids.at(0));
    }
    eos_ = *tok.eos();
  }
  const HParams& hparams() const override { return hp_; }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_seq() const override { return n_seq_; }
  const gguf::File& file() const override { return file_; }
  const ModelInfo& info() const override { return info_; }
  std::string describe() const override { return "fake"; }
  void forward(const engine::Batch& batch, std::vector<float>& logits) override {
    if (fail) throw Error("fake", "the model broke");
    batches.push_back(batch);
    logits.assign(static_cast<size_t>(batch.n_logits() * hp_.n_vocab), 0.0f);
    size_t row = 0;
    for (int64_t i = 0; i < batch.size(); ++i) {
      auto& kv = slots_.at(static_cast<size_t>(batch.seq[i]));
      const auto pos = static_cast<size_t>(batch.pos[i]);
      if (pos >= static_cast<size_t>(n_ctx_)) throw Error("fake", "context full");
      if (kv.size() < pos) throw Error("fake", "a hole in the cache");
      kv.resize(pos);  // later entries are overwritten
      kv.push_back(batch.tokens[i]);
      if (!batch.want_logits[i]) continue;
      uint64_t h = 1469598103934665603ull;
      for (int32_t t : kv) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
      const int32_t letter = cycle > 0 ? letters_[kv.size() % static_cast<size_t>(cycle)]
                                       : letters_[h % letters_.size()];
      const int32_t next = kv.back() == eog_trigger ? eos_ : letter;
      logits[row * static_cast<size_t>(hp_.n_vocab) + static_cast<size_t>(next)] = 10.0f;
      ++row;
    }
  }
  int32_t eog_trigger = -1;
  int cycle = 0;  // > 0: the next token is the cycle-th letter of the position (repeats)
  bool fail = false;
  std::vector<engine::Batch> batches;

 private:
  gguf::File file_;  // the tiny model's: the runner interface offers the file
  ModelInfo info_;
  HParams hp_;
  int64_t n_ctx_, n_seq_;
  std::vector<std::vector<int32_t>> slots_;
  std::vector<int32_t> letters_;
  int32_t eos_;
};

inline GenerationParams greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampler.temperature = 0;
  return p;
}

inline std::vector<int32_t> prompt_of(int n, int32_t seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(100 + (seed * 31 + i * 7) % 200);
  return p;
}

struct Result {
  std::string text;
  std::vector<int32_t> tokens;
  std::optional<Finish> finish;
};

// Drains whatever the stream holds (without waiting).
inline void read(RequestStream& s, Result& r) {
  StreamUpdate u = s.wait(std::chrono::milliseconds(0));
  r.text += u.text;
  r.tokens.insert(r.tokens.end(), u.tokens.begin(), u.tokens.end());
  if (u.finish) r.finish = u.finish;
}

// Steps until every stream has finished (bounded).
inline std::vector<Result> run_all(Scheduler& s,
                                   const std::vector<std::shared_ptr<RequestStream>>& streams) {
  std::vector<Result> results(streams.size());
  for (int i = 0; i < 10000; ++i) {
    s.step();
    bool all = true;
    for (size_t k = 0; k < streams.size(); ++k) {
      read(*streams[k], results[k]);
      all = all && results[k].finish.has_value();
    }
    if (all) return results;
  }
  ADD_FAILURE() << "requests did not finish";
  return results;
}

inline Result alone(const GenerationParams& p) {
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  return run_all(s, {s.submit(p)})[0];
}

}  // namespace herd::engine::scheduler_test
