// Speculative decoding in the scheduler: prompt lookup and a draft model keep the target's
// greedy tokens (on every shared reference model), end tokens inside a draft, sampled drafts
// from the draft's own distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "engine/scheduler.h"
#include "engine/scheduler_test_util.h"

namespace herd::engine::scheduler_test {
namespace {

// Prompt lookup on a model whose text repeats: the same tokens as without it, in fewer
// target steps, the drafts running at the positions after the pending token.
TEST(Scheduler, PromptLookupKeepsTheTokensAndTakesFewerSteps) {
  auto run = [](int lookup, int64_t max_tokens, std::vector<engine::Batch>* batches) {
    FakeRunner runner(*tiny().tok, 1, 4096);
    runner.cycle = 5;
    Scheduler s(runner, *tiny().tok, {}, nullptr);
    GenerationParams p = greedy(prompt_of(12, 3), max_tokens);
    if (lookup > 0) p.speculative = engine::SpeculativeParams{lookup, 1, 3};
    Result r = run_all(s, {s.submit(p)})[0];
    if (batches) *batches = runner.batches;
    return r;
  };
  std::vector<engine::Batch> batches;
  for (int64_t max_tokens : {40, 7, 1}) {
    SCOPED_TRACE(max_tokens);
    const Result plain = run(0, max_tokens, nullptr);
    const Result drafted = run(4, max_tokens, &batches);
    ASSERT_TRUE(plain.finish && drafted.finish);
    EXPECT_EQ(drafted.tokens, plain.tokens);
    EXPECT_EQ(drafted.text, plain.text);
    EXPECT_EQ(drafted.finish->reason, plain.finish->reason);
    EXPECT_EQ(drafted.finish->n_completion, max_tokens);
    EXPECT_EQ(plain.finish->n_drafted, 0);
    EXPECT_EQ(plain.finish->n_target_steps, max_tokens);
    if (max_tokens == 40) {
      // After one period the drafts are right: most are kept, far fewer steps.
      EXPECT_GT(drafted.finish->n_draft_accepted, 20);
      EXPECT_LE(drafted.finish->n_draft_accepted, drafted.finish->n_drafted);
      EXPECT_LT(drafted.finish->n_target_steps, 20);
      // Each step: the pending token at the slot's next position, its draft right after.
      bool drafted_batch = false;
      for (const engine::Batch& b : batches) {
        for (int64_t i = 1; i < b.size(); ++i) EXPECT_EQ(b.pos[i], b.pos[i - 1] + 1);
        drafted_batch = drafted_batch || b.size() > 1;
      }
      EXPECT_TRUE(drafted_batch);
    }
  }
}

// A draft token the target keeps may end the reply: an end-of-generation token in it stops
// the request there, as without the draft.
TEST(Scheduler, PromptLookupStopsAtAnEndTokenInsideTheDraft) {
  auto run = [](int lookup) {
    FakeRunner runner(*tiny().tok, 1, 4096);
    runner.cycle = 4;
    runner.eog_trigger = tiny().tok->encode("c", false, false).at(0);
    Scheduler s(runner, *tiny().tok, {}, nullptr);
    GenerationParams p = greedy(prompt_of(6, 1), 50);
    if (lookup > 0) p.speculative = engine::SpeculativeParams{lookup, 1, 3};
    return run_all(s, {s.submit(p)})[0];
  };
  const Result plain = run(0), drafted = run(6);
  EXPECT_EQ(drafted.tokens, plain.tokens);
  EXPECT_EQ(drafted.finish->reason, FinishReason::kStop);
  EXPECT_EQ(plain.finish->reason, FinishReason::kStop);
}

// Every shared reference model: greedy output with prompt-lookup drafts is token for token the
// output without them; on those with recurrent state (Gated DeltaNet, DeepSeek V4's
// compressed cache) a refused draft sends the state back and the kept tokens run again. The
// random-weight models repeat themselves soon, so drafts are made and kept (the test says how
// many). Exact because every kernel gives a token's row the same bits whatever else shares its
// batch (kernels' MatmulTest.TokenCountDoesNotChangeAToken): a verification's logits are a
// decode's.
TEST(Scheduler, PromptLookupGivesTheSameGreedyTokensOnEveryReferenceModel) {
  int64_t drafted = 0, kept = 0, models = 0, recurrent = 0;
  for (const char* dir :
       {"../shared/models", "../shared/models/frontier", "../shared/models/frontier2"}) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& f : files) {
      SCOPED_TRACE(f.string());
      engine::LocalOptions lo;
      lo.threads = 2;
      lo.n_ctx = 96;
      lo.n_seq = 1;
      lo.device = "cpu";
      auto runner = engine::LocalRunner::open(f.string(), lo);
      recurrent += runner->recurrent() ? 1 : 0;
      const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
      std::vector<int32_t> prompt = tok.encode("the herd runs the model and the herd", true, false);
      std::vector<int32_t> outputs[2];
      for (int lookup : {0, 4}) {
        Scheduler s(*runner, tok, {}, nullptr);
        GenerationParams p = greedy(prompt, 24);
        p.stop_at_eog = false;
        if (lookup > 0) p.speculative = engine::SpeculativeParams{lookup, 1, 3};
        const Result r = run_all(s, {s.submit(p)})[0];
        outputs[lookup > 0] = r.tokens;
        if (lookup > 0) {
          drafted += r.finish->n_drafted;
          kept += r.finish->n_draft_accepted;
        }
      }
      EXPECT_EQ(outputs[1], outputs[0]);
      ++models;
    }
  }
  EXPECT_GE(models, 40);
  EXPECT_GE(recurrent, 4);
  EXPECT_GT(kept, 0) << "no draft was kept in " << drafted;
  std::printf("prompt lookup over %lld models: %lld of %lld draft tokens kept\n",
              static_cast<long long>(models), static_cast<long long>(kept),
              static_cast<long long>(drafted));
}

// A draft model (the same random weights in Q4_0) for a Q8_0 target, two requests drafting
// together: the target's greedy tokens, most drafts kept. A draft of another vocabulary is
// refused.
TEST(Scheduler, ADraftModelGivesTheSameGreedyTokens) {
  engine::LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 96;
  lo.n_seq = 2;
  lo.device = "cpu";
  auto target = engine::LocalRunner::open("../shared/models/llama-q8_0.gguf", lo);
  auto draft = engine::LocalRunner::open("../shared/models/llama-q4_0.gguf", lo);
  const auto tok = tokenizer::Tokenizer::from_gguf(target->file());
  const std::vector<std::vector<int32_t>> prompts = {
      tok.encode("the herd runs the model", true, false),
      tok.encode("a pod of machines and a hub", true, false)};
  std::vector<Result> outputs[2];
  for (int with_draft : {0, 1}) {
    SchedulerOptions so;
    so.draft = with_draft ? draft.get() : nullptr;
    Scheduler s(*target, tok, so, nullptr);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& prompt : prompts) {
      GenerationParams p = greedy(prompt, 30);
      p.stop_at_eog = false;
      if (with_draft) p.speculative = engine::SpeculativeParams{0, 1, 3, 4};
      streams.push_back(s.submit(p));
    }
    outputs[with_draft] = run_all(s, streams);
  }
  int64_t drafted = 0, kept = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(outputs[1][i].tokens, outputs[0][i].tokens) << i;
    drafted += outputs[1][i].finish->n_drafted;
    kept += outputs[1][i].finish->n_draft_accepted;
    EXPECT_LT(outputs[1][i].finish->n_target_steps, 30);
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(kept * 2, drafted) << kept << " of " << drafted;
  std::printf("a q4_0 draft for a q8_0 target: %lld of %lld draft tokens kept\n",
              static_cast<long long>(kept), static_cast<long long>(drafted));

  auto other = engine::LocalRunner::open("../shared/models/qwen3-f32.gguf", lo);
  SchedulerOptions so;
  so.draft = other.get();
  try {
    Scheduler s(*target, tok, so, nullptr);
    ADD_FAILURE() << "a draft of another vocabulary was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

// A sampled request drafts from the draft model's own distribution (q), which the check
// weighs against the target's (p): with the target itself as its draft, q is p (up to the
// last bits of another batch shape), so nearly every draft token is kept, where drafts
// chosen greedily would be kept only as often as the target happens to draw them.
TEST(Scheduler, SampledDraftsComeFromTheDraftsDistribution) {
  engine::LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 96;
  lo.n_seq = 1;
  lo.device = "cpu";
  auto target = engine::LocalRunner::open("../shared/models/llama-q8_0.gguf", lo);
  auto draft = engine::LocalRunner::open("../shared/models/llama-q8_0.gguf", lo);
  const auto tok = tokenizer::Tokenizer::from_gguf(target->file());
  SchedulerOptions so;
  so.draft = draft.get();
  Scheduler s(*target, tok, so, nullptr);
  GenerationParams p = greedy(tok.encode("the herd runs the model", true, false), 40);
  p.sampler.temperature = 1.0f;
  p.sampler.top_k = 0;
  p.sampler.top_p = 1.0f;
  p.sampler.min_p = 0.0f;
  p.stop_at_eog = false;
  p.speculative = engine::SpeculativeParams{0, 1, 3, 4};
  const Result r = run_all(s, {s.submit(p)})[0];
  ASSERT_TRUE(r.finish.has_value());
  EXPECT_EQ(r.finish->n_completion, 40);
  EXPECT_GT(r.finish->n_drafted, 20);
  EXPECT_GE(r.finish->n_draft_accepted * 20, r.finish->n_drafted * 19)
      << r.finish->n_draft_accepted << " of " << r.finish->n_drafted;
}

}  // namespace
}  // namespace herd::engine::scheduler_test
