// The scheduler drafting with the model's MTP head (SpeculativeParams::mtp, scheduler_mtp.cpp)
// on the shared reference models that have a NextN block (those with recurrent state too).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/reference_check.h"
#include "engine/scheduler.h"

namespace herd::engine {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<LocalRunner> open_with_head(const std::string& name, int64_t n_seq) {
  LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 128;
  lo.n_seq = n_seq;
  lo.device = "cpu";
  lo.mtp = true;
  // Absorbed attention whatever the batch: a prompt in chunks gives the bits of one pass.
  lo.mla_decompress_min_tokens = 0;
  return LocalRunner::open("../shared/models/" + name + ".gguf", lo);
}

GenerationParams greedy(std::vector<int32_t> prompt, int64_t max_tokens, int mtp) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampler.temperature = 0;
  p.stop_at_eog = false;
  if (mtp > 0) p.speculative = SpeculativeParams{0, 1, 3, 0, mtp};
  return p;
}

std::vector<int32_t> prompt_of(int n, int32_t seed, int64_t n_vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((seed * 31 + i * 7) % n_vocab));
  return p;
}

struct Traced {
  std::vector<int32_t> tokens;
  Finish finish;
  // The tokens of every batch after the first generated token: the pending token and the
  // head's draft (a head that missed a prompt position drafts differently).
  std::vector<std::vector<int32_t>> decode_batches;
};

// Runs `streams` to their ends; traces the first.
std::vector<Traced> run_all(Scheduler& s,
                            const std::vector<std::shared_ptr<RequestStream>>& streams) {
  std::vector<Traced> out(streams.size());
  std::vector<bool> done(streams.size(), false);
  for (int step = 0; step < 10000; ++step) {
    const bool generating = !out[0].tokens.empty() && !done[0];
    s.step();
    if (generating) out[0].decode_batches.push_back(s.last_batch().tokens);
    bool all = true;
    for (size_t i = 0; i < streams.size(); ++i) {
      StreamUpdate u = streams[i]->wait(0ms);
      out[i].tokens.insert(out[i].tokens.end(), u.tokens.begin(), u.tokens.end());
      if (u.finish) {
        out[i].finish = *u.finish;
        done[i] = true;
      }
      all = all && done[i];
    }
    if (all) return out;
  }
  ADD_FAILURE() << "requests did not finish";
  return out;
}

class SchedulerMtp : public ::testing::TestWithParam<std::string> {};

// Two requests drafting together: the target's greedy tokens, token for token, with drafts
// made and checked (random weights: the head's guesses are rarely the target's).
TEST_P(SchedulerMtp, GivesTheSameGreedyTokens) {
  auto runner = open_with_head(GetParam(), 2);
  ASSERT_GT(runner->mtp_layers(), 0);
  ASSERT_FALSE(runner->recurrent());
  const int64_t v = runner->hparams().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(12, 1, v), prompt_of(7, 2, v)};
  const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
  std::vector<Traced> outputs[2];
  for (int mtp : {0, 3}) {
    Scheduler s(*runner, tok, {}, nullptr);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& p : prompts) streams.push_back(s.submit(greedy(p, 24, mtp)));
    outputs[mtp > 0] = run_all(s, streams);
  }
  int64_t drafted = 0, kept = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(outputs[1][i].finish.reason, FinishReason::kLength) << outputs[1][i].finish.error;
    EXPECT_EQ(outputs[1][i].tokens, outputs[0][i].tokens) << i;
    EXPECT_EQ(outputs[0][i].finish.n_drafted, 0);
    // Every step but the last few (max_tokens) drafts 3.
    EXPECT_GE(outputs[1][i].finish.n_drafted, 3 * (outputs[1][i].finish.n_target_steps - 3));
    drafted += outputs[1][i].finish.n_drafted;
    kept += outputs[1][i].finish.n_draft_accepted;
  }
  EXPECT_GT(drafted, 0);
  std::printf("[ mtp %s ] %lld of %lld drafted tokens kept\n", GetParam().c_str(),
              static_cast<long long>(kept), static_cast<long long>(drafted));

  // Sampled: the head's greedy drafts are checked as drafts all on their token (check_draft);
  // the request runs to its length with drafts checked.
  GenerationParams sampled = greedy(prompts[0], 24, 3);
  sampled.sampler.temperature = 0.8f;
  sampled.sampler.seed = 7;
  Scheduler s(*runner, tok, {}, nullptr);
  const Traced r = run_all(s, {s.submit(sampled)})[0];
  EXPECT_EQ(r.finish.reason, FinishReason::kLength) << r.finish.error;
  EXPECT_EQ(r.tokens.size(), 24u);
  EXPECT_GT(r.finish.n_drafted, 0);
}

// A long prompt fed in chunks of 8 (the head sees each chunk after its forward) drafts as the
// prompt in one pass does; and a follow-up that reuses the slot's prefix drafts as a cold run.
TEST_P(SchedulerMtp, ChunksAndReusedPrefixesDraftAsOnePass) {
  auto runner = open_with_head(GetParam(), 1);
  const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
  const int64_t v = runner->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(40, 3, v);
  std::vector<Traced> runs;
  for (int64_t batch_tokens : {256, 8}) {
    // Each on a runner of its own: no head rows left from the other run.
    auto fresh = open_with_head(GetParam(), 1);
    SchedulerOptions so;
    so.batch_tokens = batch_tokens;
    Scheduler s(*fresh, tok, so, nullptr);
    runs.push_back(run_all(s, {s.submit(greedy(prompt, 16, 3))})[0]);
  }
  ASSERT_FALSE(runs[0].decode_batches.empty());
  EXPECT_EQ(runs[1].tokens, runs[0].tokens);
  EXPECT_EQ(runs[1].decode_batches, runs[0].decode_batches);
  EXPECT_EQ(runs[0].decode_batches[0].size(), 4u);  // the pending token and 3 drafted

  // The follow-up: the prompt, the reply and more, on the slot that holds the first two.
  std::vector<int32_t> follow_up = prompt;
  follow_up.insert(follow_up.end(), runs[0].tokens.begin(), runs[0].tokens.end());
  for (int32_t t : prompt_of(6, 4, v)) follow_up.push_back(t);
  Traced reused, cold;
  {
    Scheduler s(*runner, tok, {}, nullptr);
    run_all(s, {s.submit(greedy(prompt, 16, 3))});
    reused = run_all(s, {s.submit(greedy(follow_up, 12, 3))})[0];
  }
  {
    auto fresh = open_with_head(GetParam(), 1);  // nothing reused
    Scheduler s(*fresh, tok, {}, nullptr);
    cold = run_all(s, {s.submit(greedy(follow_up, 12, 3))})[0];
  }
  EXPECT_GT(reused.finish.n_cached, 0);
  EXPECT_EQ(cold.finish.n_cached, 0);
  EXPECT_EQ(reused.tokens, cold.tokens);
  EXPECT_EQ(reused.decode_batches, cold.decode_batches);
  std::printf("[ mtp %s ] chunked: %lld of %lld kept; follow-up reused %lld of %zu tokens\n",
              GetParam().c_str(), static_cast<long long>(runs[1].finish.n_draft_accepted),
              static_cast<long long>(runs[1].finish.n_drafted),
              static_cast<long long>(reused.finish.n_cached), follow_up.size());
}

// A request that does not draft with the head on the same slot in between: the next one that
// does reuses only the prefix the head saw, and drafts as a cold run.
TEST_P(SchedulerMtp, APlainRequestBetweenLeavesTheHeadRight) {
  auto runner = open_with_head(GetParam(), 1);
  const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
  const int64_t v = runner->hparams().n_vocab;
  const std::vector<int32_t> a = prompt_of(10, 5, v);
  std::vector<int32_t> b = a;
  for (int32_t t : prompt_of(10, 6, v)) b.push_back(t);
  std::vector<int32_t> c = b;
  for (int32_t t : prompt_of(5, 7, v)) c.push_back(t);
  Traced reused, cold;
  {
    Scheduler s(*runner, tok, {}, nullptr);
    run_all(s, {s.submit(greedy(a, 4, 3))});
    run_all(s, {s.submit(greedy(b, 4, 0))});  // plain: the head does not see b's rows
    reused = run_all(s, {s.submit(greedy(c, 10, 3))})[0];
  }
  {
    auto fresh = open_with_head(GetParam(), 1);
    Scheduler s(*fresh, tok, {}, nullptr);
    cold = run_all(s, {s.submit(greedy(c, 10, 3))})[0];
  }
  // a's prompt less one (the head's row of the first position run again must be there).
  EXPECT_EQ(reused.finish.n_cached, static_cast<int64_t>(a.size()) - 1);
  EXPECT_EQ(reused.tokens, cold.tokens);
  EXPECT_EQ(reused.decode_batches, cold.decode_batches);
}

// Qwen3.5's MTP layer on its hybrid models: their Gated DeltaNet state goes back when a
// check refuses part of a draft (hold_state) and the kept tokens run again, so the greedy
// tokens are the target's; the head saw each kept position when it was checked.
TEST(SchedulerMtpRecurrent, GivesTheSameGreedyTokens) {
  for (const char* name : {"frontier2/qwen35-q8_0", "frontier2/qwen35moe-q8_0"}) {
    SCOPED_TRACE(name);
    auto runner = open_with_head(name, 2);
    ASSERT_GT(runner->mtp_layers(), 0);
    ASSERT_TRUE(runner->recurrent());
    const int64_t v = runner->hparams().n_vocab;
    const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
    const std::vector<std::vector<int32_t>> prompts = {prompt_of(12, 1, v), prompt_of(7, 2, v)};
    std::vector<Traced> outputs[2];
    for (int mtp : {0, 3}) {
      Scheduler s(*runner, tok, {}, nullptr);
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (const auto& p : prompts) streams.push_back(s.submit(greedy(p, 20, mtp)));
      outputs[mtp > 0] = run_all(s, streams);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(outputs[1][i].finish.reason, FinishReason::kLength) << outputs[1][i].finish.error;
      EXPECT_EQ(outputs[1][i].tokens, outputs[0][i].tokens) << i;
      EXPECT_GT(outputs[1][i].finish.n_drafted, outputs[1][i].finish.n_draft_accepted);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NextNModels, SchedulerMtp,
                         ::testing::Values("frontier2/glm4moe-q8_0", "frontier2/glm4moe-f32",
                                           "frontier2/glm-dsa-q8_0", "frontier2/glm-dsa-f32"),
                         model_test_name);

}  // namespace
}  // namespace herd::engine
