// Several sequences in one batch compute what they compute alone, and the KV cache refuses
// what does not fit.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/runner.h"
#include "util/error.h"

namespace herd::engine {
namespace {

std::unique_ptr<LocalRunner> open_model(const std::string& name, int64_t n_seq, int64_t n_ctx,
                                        int threads = 2) {
  LocalOptions o;
  o.threads = threads;
  o.n_seq = n_seq;
  o.n_ctx = n_ctx;
  return LocalRunner::open("../shared/models/" + name + ".gguf", o);
}

// Relative difference of two logit rows, as the reference test measures it.
double row_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

TEST(Batch, SequencesInOneBatchMatchSequencesAlone) {
  for (const char* model : {"qwen3-f32", "llama-q4_0", "qwen3moe-f16"}) {
    SCOPED_TRACE(model);
    const std::vector<std::vector<int32_t>> prompts = {
        {1, 5, 9, 200, 17}, {3, 100, 42}, {7, 7, 7, 7, 8, 9, 10}};
    // Alone: each sequence in its own slot 0 of a fresh model, token by token.
    std::vector<std::vector<float>> alone;
    for (const auto& p : prompts) {
      auto runner = open_model(model, 1, 64);
      std::vector<float> logits;
      for (size_t i = 0; i < p.size(); ++i) {
        Batch b;
        b.add(p[i], 0, static_cast<int32_t>(i), true);
        runner->forward(b, logits);
      }
      alone.push_back(logits);  // the last position's logits
    }
    // Together: all three prompts in one batch (slots 0..2), each wanting its last logits.
    auto runner = open_model(model, 3, 64);
    Batch b;
    for (size_t s = 0; s < prompts.size(); ++s) {
      for (size_t i = 0; i < prompts[s].size(); ++i) {
        b.add(prompts[s][i], static_cast<int32_t>(s), static_cast<int32_t>(i),
              i + 1 == prompts[s].size());
      }
    }
    std::vector<float> logits;
    runner->forward(b, logits);
    const int64_t n_vocab = runner->hparams().n_vocab;
    ASSERT_EQ(logits.size(), 3u * static_cast<size_t>(n_vocab));
    for (size_t s = 0; s < prompts.size(); ++s) {
      // Quantized activations round per token, so batching does not change them; only
      // the summation order of the kernels may differ.
      EXPECT_LT(row_error(logits.data() + s * n_vocab, alone[s].data(), n_vocab), 1e-4) << s;
    }
    // Then one decode step for all three at once.
    Batch step;
    for (size_t s = 0; s < prompts.size(); ++s) {
      step.add(11, static_cast<int32_t>(s), static_cast<int32_t>(prompts[s].size()), true);
    }
    runner->forward(step, logits);
    for (size_t s = 0; s < prompts.size(); ++s) {
      auto single = open_model(model, 1, 64);
      std::vector<float> expect;
      Batch one;
      for (size_t i = 0; i < prompts[s].size(); ++i)
        one.add(prompts[s][i], 0, static_cast<int32_t>(i), false);
      one.add(11, 0, static_cast<int32_t>(prompts[s].size()), true);
      single->forward(one, expect);
      EXPECT_LT(row_error(logits.data() + s * n_vocab, expect.data(), n_vocab), 1e-4) << s;
    }
  }
}

// Decode of one sequence has fewer attention calls than threads when the heads are one call
// (MLA): each call's positions are cut over the threads and merged. Against one thread,
// which never cuts, over a context long enough to be cut in 2 and 3 (uneven) chunks.
TEST(Batch, DecodeCutOverThreadsMatchesOneThread) {
  const std::string model = "frontier/deepseek2-f32";
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 230; ++i) prompt.push_back((i * 37 + 5) % 300);
  auto decode = [&](int threads) {
    auto runner = open_model(model, 1, 256, threads);
    std::vector<float> logits, all;
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], 0, static_cast<int32_t>(i), false);
    runner->forward(b, logits);
    for (int32_t pos = 230; pos < 236; ++pos) {
      Batch step;
      step.add((pos * 11) % 300, 0, pos, true);
      runner->forward(step, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return std::pair{all, runner->hparams().n_vocab};
  };
  const auto [want, n_vocab] = decode(1);
  for (int threads : {2, 3}) {
    const auto [got, n] = decode(threads);
    ASSERT_EQ(got.size(), want.size());
    for (size_t step = 0; step < 6; ++step) {
      EXPECT_LT(row_error(got.data() + step * n, want.data() + step * n, n), 1e-4)
          << threads << " threads, step " << step;
    }
  }
}

TEST(Batch, FullContextIsAClearError) {
  auto runner = open_model("llama-q8_0", 2, 8);
  EXPECT_EQ(runner->n_ctx(), 8);
  std::vector<float> logits;
  Batch b;
  b.add(1, 0, 8, true);
  try {
    runner->forward(b, logits);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos) << e.what();
  }
  Batch bad_slot;
  bad_slot.add(1, 2, 0, true);
  EXPECT_THROW(runner->forward(bad_slot, logits), Error);
  Batch bad_token;
  bad_token.add(384, 0, 0, true);
  EXPECT_THROW(runner->forward(bad_token, logits), Error);
}

}  // namespace
}  // namespace herd::engine
