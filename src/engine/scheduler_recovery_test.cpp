// A runner that loses its slots' states (StatesLost: a pod formed again after a lost node)
// in the middle of prefills and replies: the scheduler runs every request's tokens again
// from position 0, and the requests' outputs are those of a run that lost nothing, nothing
// published twice; a runner that loses them on every pass ends the requests with an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/scheduler_test_util.h"

namespace herd::engine::scheduler_test {
namespace {

// Wraps a runner: at the chosen forward() calls (counted from 0) it loses every slot's states
// instead of running the batch, as a pod formed again does. It holds the runner to the
// contract: after a loss a slot is empty, so a batch that continues a slot past what it holds
// (not from position 0) is an error, and the snapshots are gone.
class LosingRunner : public ModelRunner {
 public:
  LosingRunner(ModelRunner& inner, std::set<int> lose_at)
      : inner_(inner), lose_at_(std::move(lose_at)), held_(static_cast<size_t>(inner.n_seq())) {}

  const HParams& hparams() const override { return inner_.hparams(); }
  int64_t n_ctx() const override { return inner_.n_ctx(); }
  int64_t n_seq() const override { return inner_.n_seq(); }
  const gguf::File& file() const override { return inner_.file(); }
  const ModelInfo& info() const override { return inner_.info(); }
  std::string describe() const override { return "losing " + inner_.describe(); }
  void save_state(int32_t seq, int64_t pos) override { inner_.save_state(seq, pos); }
  int64_t restore_state(int32_t seq, int64_t at_most) override {
    const int64_t pos = inner_.restore_state(seq, at_most);
    held_[static_cast<size_t>(seq)] = static_cast<size_t>(pos);
    return pos;
  }
  bool holds_states() const override { return inner_.holds_states(); }
  void hold_state(int32_t seq) override { inner_.hold_state(seq); }
  void return_to_held_state(int32_t seq) override { inner_.return_to_held_state(seq); }

  void forward(const Batch& batch, std::vector<float>& logits) override {
    const int call = calls++;
    if (always || lose_at_.count(call) > 0) {
      ++losses;
      // restore_state(seq, 0) forgets every snapshot of the slot (none is at position 0).
      for (int32_t seq = 0; seq < inner_.n_seq(); ++seq) inner_.restore_state(seq, 0);
      std::fill(held_.begin(), held_.end(), 0);
      throw StatesLost("test: lost at call " + std::to_string(call));
    }
    for (int64_t i = 0; i < batch.size(); ++i) {
      size_t& held = held_[static_cast<size_t>(batch.seq[static_cast<size_t>(i)])];
      const auto pos = static_cast<size_t>(batch.pos[static_cast<size_t>(i)]);
      if (pos > held) throw Error("test", "a batch continues a slot past what it holds");
      held = pos + 1;
    }
    inner_.forward(batch, logits);
  }

  bool always = false;
  int calls = 0, losses = 0;

 private:
  ModelRunner& inner_;
  std::set<int> lose_at_;
  std::vector<size_t> held_;  // positions each slot holds
};

// Two requests, prefills over several steps (batch_tokens), run on `runner`; their results.
std::vector<Result> two_requests(ModelRunner& runner, const tokenizer::Tokenizer& tok,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 int64_t max_tokens, int lookup, int64_t batch_tokens) {
  SchedulerOptions so;
  so.batch_tokens = batch_tokens;
  Scheduler s(runner, tok, so, nullptr);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& prompt : prompts) {
    GenerationParams p = greedy(prompt, max_tokens);
    p.stop_at_eog = false;
    if (lookup > 0) p.speculative = SpeculativeParams{lookup, 1, 3};
    streams.push_back(s.submit(p));
  }
  return run_all(s, streams);
}

void expect_same(const std::vector<Result>& got, const std::vector<Result>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(got[i].finish && expected[i].finish);
    EXPECT_EQ(got[i].finish->reason, expected[i].finish->reason) << got[i].finish->error;
    EXPECT_EQ(got[i].tokens, expected[i].tokens);
    EXPECT_EQ(got[i].text, expected[i].text);
    EXPECT_EQ(got[i].finish->n_completion, expected[i].finish->n_completion);
  }
}

// Losses mid-prefill (calls 1, 2: the prompts run in chunks of 8), mid-reply (12), during the
// run again (13), and later (17): the same tokens, with and without prompt-lookup drafts.
TEST(SchedulerRecovery, LostStatesGiveTheSameTokens) {
  for (int lookup : {0, 4}) {
    SCOPED_TRACE(lookup);
    const std::vector<std::vector<int32_t>> prompts = {prompt_of(21, 1), prompt_of(13, 2)};
    FakeRunner plain(*tiny().tok, 2, 4096);
    plain.cycle = 5;  // repeats: lookup drafts are kept
    const std::vector<Result> expected = two_requests(plain, *tiny().tok, prompts, 40, lookup, 8);
    FakeRunner inner(*tiny().tok, 2, 4096);
    inner.cycle = 5;
    LosingRunner losing(inner, {1, 2, 12, 13, 17});
    const std::vector<Result> got = two_requests(losing, *tiny().tok, prompts, 40, lookup, 8);
    EXPECT_EQ(losing.losses, 5) << losing.calls << " calls";
    expect_same(got, expected);
    // Each request ran what it held again (a reply's tokens in chunks of the budget).
    EXPECT_GT(got[0].finish->n_replayed, 21);
    EXPECT_GT(got[1].finish->n_replayed, 13);
    EXPECT_EQ(expected[0].finish->n_replayed, 0);
    if (lookup > 0) {
      EXPECT_GT(got[0].finish->n_draft_accepted, 0);
    }
  }
}

// A prompt's rows are published once: a check's scores and an eval's logits, lost mid-prefill.
TEST(SchedulerRecovery, APromptsRowsArePublishedOnce) {
  auto run = [](ModelRunner& runner) {
    SchedulerOptions so;
    so.batch_tokens = 6;
    Scheduler s(runner, *tiny().tok, so, nullptr);
    GenerationParams check = greedy(prompt_of(20, 3), 0);
    check.score_from = 5;
    GenerationParams eval = greedy(prompt_of(17, 4), 0);
    eval.prompt_logits = true;
    auto a = s.submit(check), b = s.submit(eval);
    std::vector<TokenScore> scores;
    std::vector<float> logits;
    bool a_done = false, b_done = false;
    for (int i = 0; i < 1000 && !(a_done && b_done); ++i) {
      s.step();
      StreamUpdate u = a->wait(std::chrono::milliseconds(0));
      scores.insert(scores.end(), u.scores.begin(), u.scores.end());
      a_done = a_done || u.finish.has_value();
      u = b->wait(std::chrono::milliseconds(0));
      logits.insert(logits.end(), u.logits.begin(), u.logits.end());
      b_done = b_done || u.finish.has_value();
    }
    EXPECT_TRUE(a_done && b_done);
    return std::make_pair(scores, logits);
  };
  FakeRunner plain(*tiny().tok, 2, 4096);
  const auto expected = run(plain);
  FakeRunner inner(*tiny().tok, 2, 4096);
  LosingRunner losing(inner, {2, 4});
  const auto got = run(losing);
  EXPECT_EQ(losing.losses, 2);
  ASSERT_EQ(got.first.size(), expected.first.size());
  EXPECT_EQ(got.first.size(), 15u);
  for (size_t i = 0; i < got.first.size(); ++i) {
    EXPECT_EQ(got.first[i].token, expected.first[i].token) << i;
    EXPECT_EQ(got.first[i].check.probability, expected.first[i].check.probability) << i;
    EXPECT_EQ(got.first[i].check.gap, expected.first[i].check.gap) << i;
  }
  EXPECT_EQ(got.second, expected.second);
}

// A runner that loses its states on every pass: the requests end with an error naming it,
// after a bounded number of tries; the next request is served when the runner recovers.
TEST(SchedulerRecovery, ARunnerThatAlwaysLosesItsStatesEndsTheRequests) {
  FakeRunner inner(*tiny().tok, 2, 4096);
  LosingRunner losing(inner, {});
  losing.always = true;
  Scheduler s(losing, *tiny().tok, {}, nullptr);
  const std::vector<Result> r =
      run_all(s, {s.submit(greedy(prompt_of(9, 1), 5)), s.submit(greedy(prompt_of(7, 2), 5))});
  for (const Result& x : r) {
    ASSERT_TRUE(x.finish);
    EXPECT_EQ(x.finish->reason, FinishReason::kError);
    EXPECT_NE(x.finish->error.find("states were lost"), std::string::npos) << x.finish->error;
  }
  EXPECT_LE(losing.calls, 20);
  losing.always = false;
  const Result next = run_all(s, {s.submit(greedy(prompt_of(9, 1), 5))})[0];
  EXPECT_EQ(next.finish->reason, FinishReason::kLength);
  EXPECT_EQ(next.tokens, alone(greedy(prompt_of(9, 1), 5)).tokens);
}

// Real models, one with a KV cache and one with recurrent state (Qwen3.5's Gated DeltaNet:
// its snapshots and held states are gone with the loss), two requests with prompt-lookup
// drafts: the greedy tokens of a run that lost nothing. Exact because a token's row has the
// same bits whatever batch it runs in (kernels' MatmulTest.TokenCountDoesNotChangeAToken).
TEST(SchedulerRecovery, RealModelsGiveTheSameGreedyTokens) {
  int recurrent = 0;
  for (const char* path :
       {"../shared/models/llama-q8_0.gguf", "../shared/models/frontier2/qwen35-f32.gguf"}) {
    SCOPED_TRACE(path);
    LocalOptions lo;
    lo.threads = 2;
    lo.n_ctx = 96;
    lo.n_seq = 2;
    lo.device = "cpu";
    auto runner = LocalRunner::open(path, lo);
    const auto tok = tokenizer::Tokenizer::from_gguf(runner->file());
    const std::vector<std::vector<int32_t>> prompts = {
        tok.encode("the herd runs the model and the herd runs", true, false),
        tok.encode("a pod of machines and a hub", true, false)};
    const std::vector<Result> expected = two_requests(*runner, tok, prompts, 24, 4, 8);
    auto fresh = LocalRunner::open(path, lo);
    LosingRunner losing(*fresh, {1, 6, 7, 15});
    const std::vector<Result> got = two_requests(losing, tok, prompts, 24, 4, 8);
    EXPECT_EQ(losing.losses, 4);
    expect_same(got, expected);
    EXPECT_GT(got[0].finish->n_replayed, 0);
    recurrent += runner->recurrent() ? 1 : 0;
  }
  EXPECT_EQ(recurrent, 1);
}

}  // namespace
}  // namespace herd::engine::scheduler_test
