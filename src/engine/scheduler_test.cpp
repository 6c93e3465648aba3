// The scheduler on a fake model (scheduler_test_util.h) and on small real ones: batching,
// prefix reuse, queueing, cancellation, stops, logprobs, checks, prompt logits, constraints,
// snapshots of recurrent state; greedy output through it equals the runner's own.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "engine/scheduler_test_util.h"
#include "engine/test_sequence.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "model/synth.h"

namespace herd::engine::scheduler_test {
namespace {

using namespace std::chrono_literals;

TEST(Scheduler, ConcurrentRequestsMatchRequestsAlone) {
  FakeRunner runner(*tiny().tok, 4, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  std::vector<GenerationParams> params;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 6; ++i) {  // more requests than slots: two wait
    params.push_back(greedy(prompt_of(5 + i * 3, i), 8 + i));
    streams.push_back(s.submit(params.back()));
  }
  auto results = run_all(s, streams);
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(i);
    const Result solo = alone(params[i]);
    EXPECT_EQ(results[i].tokens, solo.tokens);
    EXPECT_EQ(results[i].text, solo.text);
    EXPECT_EQ(results[i].tokens.size(), static_cast<size_t>(8 + i));
    EXPECT_EQ(results[i].finish->reason, FinishReason::kLength);
    EXPECT_EQ(results[i].finish->n_completion, 8 + static_cast<int64_t>(i));
  }
}

TEST(Scheduler, JoiningRequestSharesTheBatchWithRunningDecodes) {
  FakeRunner runner(*tiny().tok, 2, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto a = s.submit(greedy(prompt_of(6, 1), 20));
  s.step();  // a's prompt
  s.step();  // a decodes
  auto b = s.submit(greedy(prompt_of(4, 2), 3));
  s.step();
  const engine::Batch& batch = s.last_batch();
  // One decode token of a (slot 0), then b's whole prompt (slot 1).
  ASSERT_EQ(batch.size(), 5);
  EXPECT_EQ(batch.seq[0], 0);
  EXPECT_EQ(batch.pos[0], 7);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(batch.seq[i], 1);
    EXPECT_EQ(batch.pos[i], i - 1);
  }
  auto results = run_all(s, {a, b});
  EXPECT_EQ(results[1].tokens.size(), 3u);  // b left while a went on
  EXPECT_EQ(results[0].tokens.size(), 20u);
}

TEST(Scheduler, BatchStaysWithinTheTokenBudget) {
  FakeRunner runner(*tiny().tok, 3, 4096);
  SchedulerOptions o;
  o.batch_tokens = 16;
  Scheduler s(runner, *tiny().tok, o, nullptr);
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<GenerationParams> params;
  for (int i = 0; i < 3; ++i) {
    params.push_back(greedy(prompt_of(40, i), 5));
    streams.push_back(s.submit(params.back()));
  }
  auto results = run_all(s, streams);
  for (const engine::Batch& b : runner.batches) EXPECT_LE(b.size(), 16);
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(results[i].tokens, alone(params[i]).tokens);
}

TEST(Scheduler, FollowUpReusesTheCachedPrefix) {
  FakeRunner runner(*tiny().tok, 2, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  const auto first = greedy(prompt_of(30, 3), 6);
  auto r1 = run_all(s, {s.submit(first)})[0];
  // The next turn: the history (prompt and reply) plus new tokens.
  auto next = first;
  next.prompt.insert(next.prompt.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t t : prompt_of(5, 9)) next.prompt.push_back(t);
  const size_t before = runner.batches.size();
  auto r2 = run_all(s, {s.submit(next)})[0];
  // Only the new tokens were prefilled: the first pass held 5 prompt tokens, plus the
  // reply's last token, which the first request sampled but never ran.
  EXPECT_EQ(runner.batches[before].size(), 6);
  EXPECT_EQ(r2.finish->n_cached, 30 + 5);
  EXPECT_EQ(r2.tokens, alone(next).tokens);
}

TEST(Scheduler, NewRequestTakesTheSlotWithTheLongestPrefix) {
  FakeRunner runner(*tiny().tok, 3, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto p0 = greedy(prompt_of(20, 0), 2), p1 = greedy(prompt_of(20, 1), 2),
       p2 = greedy(prompt_of(20, 2), 2);
  run_all(s, {s.submit(p0), s.submit(p1), s.submit(p2)});
  auto again = p1;
  again.prompt.push_back(7);
  auto r = run_all(s, {s.submit(again)})[0];
  EXPECT_EQ(r.finish->n_cached, 20);
  EXPECT_EQ(s.slot_tokens(1).size(), 22u);  // slot 1 held p1 and took the follow-up
  EXPECT_EQ(r.tokens, alone(again).tokens);
}

TEST(Scheduler, AdmitsFirstComeFirstServed) {
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  std::vector<std::shared_ptr<RequestStream>> streams;
  streams.push_back(s.submit(greedy(prompt_of(900, 0), 2)));  // long prompt first
  for (int i = 1; i < 5; ++i) streams.push_back(s.submit(greedy(prompt_of(3, i), 2)));
  std::vector<int> order;
  std::vector<Result> results(streams.size());
  for (int step = 0; step < 1000 && order.size() < streams.size(); ++step) {
    s.step();
    for (size_t k = 0; k < streams.size(); ++k) {
      if (results[k].finish) continue;
      read(*streams[k], results[k]);
      if (results[k].finish) order.push_back(static_cast<int>(k));
    }
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Scheduler, CancelFreesTheSlotAtTheNextStep) {
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto a = s.submit(greedy(prompt_of(4, 0), 1000));
  auto b = s.submit(greedy(prompt_of(4, 1), 3));
  for (int i = 0; i < 5; ++i) s.step();
  EXPECT_EQ(s.n_running(), 1);
  EXPECT_EQ(s.n_queued(), 1);
  a->cancel();
  s.step();
  Result ra;
  read(*a, ra);
  ASSERT_TRUE(ra.finish);
  EXPECT_EQ(ra.finish->reason, FinishReason::kCancelled);
  // b was admitted in the same step and its prompt ran.
  EXPECT_EQ(s.n_queued(), 0);
  EXPECT_EQ(s.last_batch().seq.size(), 4u);
  auto rb = run_all(s, {b})[0];
  EXPECT_EQ(rb.finish->reason, FinishReason::kLength);
}

TEST(Scheduler, CancelledWaitingRequestLeavesTheQueue) {
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto a = s.submit(greedy(prompt_of(4, 0), 50));
  auto b = s.submit(greedy(prompt_of(4, 1), 3));
  auto c = s.submit(greedy(prompt_of(4, 2), 3));
  s.step();
  EXPECT_EQ(s.n_queued(), 2);
  c->cancel();  // behind b, while a runs
  s.step();
  EXPECT_EQ(s.n_queued(), 1);
  Result rc;
  read(*c, rc);
  ASSERT_TRUE(rc.finish);
  EXPECT_EQ(rc.finish->reason, FinishReason::kCancelled);
  auto rest = run_all(s, {a, b});
  EXPECT_EQ(rest[1].tokens.size(), 3u);
}

TEST(Scheduler, RefusesWhenTheQueueIsFullOrThePromptTooLong) {
  FakeRunner runner(*tiny().tok, 1, 64);
  SchedulerOptions o;
  o.max_queue = 2;
  Scheduler s(runner, *tiny().tok, o, nullptr);
  // One for the free slot, two waiting.
  s.submit(greedy(prompt_of(4, 0), 3));
  s.submit(greedy(prompt_of(4, 1), 3));
  s.submit(greedy(prompt_of(4, 3), 3));
  try {
    s.submit(greedy(prompt_of(4, 2), 3));
    FAIL() << "a fourth request was queued";
  } catch (const SubmitError& e) {
    EXPECT_EQ(e.kind(), SubmitError::Kind::kQueueFull);
  }
  try {
    s.submit(greedy(prompt_of(64, 2), 3));
    FAIL() << "a prompt as long as the context was accepted";
  } catch (const SubmitError& e) {
    EXPECT_EQ(e.kind(), SubmitError::Kind::kPromptTooLong);
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos);
  }
  EXPECT_THROW(s.submit(greedy({1, 99999999}, 3)), SubmitError);
}

TEST(Scheduler, AFailedPassFailsItsRequestsAndIsReported) {
  FakeRunner runner(*tiny().tok, 2, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  runner.fail = true;
  auto r = run_all(s, {s.submit(greedy(prompt_of(5, 0), 4))})[0];
  EXPECT_EQ(r.finish->reason, FinishReason::kError);
  EXPECT_NE(r.finish->error.find("the model broke"), std::string::npos);
  EXPECT_NE(s.failure().find("the model broke"), std::string::npos);
  EXPECT_EQ(s.n_running(), 0);
  // It recovers: the next request runs, from an empty slot, and the failure is cleared.
  runner.fail = false;
  const auto p = greedy(prompt_of(5, 0), 4);
  auto ok = run_all(s, {s.submit(p)})[0];
  EXPECT_EQ(ok.tokens, alone(p).tokens);
  EXPECT_EQ(ok.finish->n_cached, 0);
  EXPECT_EQ(s.failure(), "");
}

TEST(Scheduler, ContextFullEndsWithLength) {
  FakeRunner runner(*tiny().tok, 1, 16);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto r = run_all(s, {s.submit(greedy(prompt_of(10, 0), -1))})[0];
  EXPECT_EQ(r.finish->reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 7u);  // positions 10..15 run, a 7th token sampled from the last
}

TEST(Scheduler, EndOfGenerationStopsWithoutTheToken) {
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto p = prompt_of(5, 0);
  runner.eog_trigger = p.back();
  auto r = run_all(s, {s.submit(greedy(p, 10))})[0];
  EXPECT_EQ(r.finish->reason, FinishReason::kStop);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.finish->n_completion, 0);
  // ignore_eos: the end-of-generation token is generated like any other.
  auto through = greedy(p, 10);
  through.stop_at_eog = false;
  auto r2 = run_all(s, {s.submit(through)})[0];
  EXPECT_EQ(r2.finish->reason, FinishReason::kLength);
  ASSERT_EQ(r2.tokens.size(), 10u);
  EXPECT_EQ(r2.tokens[0], *tiny().tok->eos());
}

TEST(Scheduler, StopStringEndsTheTextBeforeIt) {
  const auto p = greedy(prompt_of(5, 4), 12);
  const Result full = alone(p);
  ASSERT_GE(full.text.size(), 6u);
  auto with_stop = p;
  with_stop.stop = {full.text.substr(3, 2)};
  const Result r = alone(with_stop);
  EXPECT_EQ(r.finish->reason, FinishReason::kStop);
  EXPECT_EQ(r.text, full.text.substr(0, full.text.find(with_stop.stop[0])));
}

TEST(Scheduler, LogprobsOfTheChosenToken) {
  auto p = greedy(prompt_of(5, 0), 3);
  p.top_logprobs = 2;
  const Result r = alone(p);
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto stream = s.submit(p);
  s.step();
  StreamUpdate u = stream->wait(0ms);
  ASSERT_EQ(u.logprobs.size(), 1u);
  EXPECT_EQ(u.logprobs[0].token, r.tokens[0]);
  ASSERT_EQ(u.logprobs[0].top.size(), 2u);
  EXPECT_EQ(u.logprobs[0].top[0].token, r.tokens[0]);
  EXPECT_GT(u.logprobs[0].logprob, -0.05f);  // logit 10 against ~400 zeros: nearly certain
  EXPECT_LT(u.logprobs[0].top[1].logprob, -9.0f);
}

TEST(Scheduler, RunReturnsAfterShutdownOnceTheWorkIsDone) {
  FakeRunner runner(*tiny().tok, 2, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto a = s.submit(greedy(prompt_of(5, 0), 30));
  std::thread engine([&] { s.run(); });
  s.shutdown();
  EXPECT_THROW(s.submit(greedy(prompt_of(5, 1), 3)), SubmitError);
  engine.join();
  Result r;
  read(*a, r);
  ASSERT_TRUE(r.finish);
  EXPECT_EQ(r.tokens.size(), 30u);
}

// A check scores the served tokens after the prompt in one prefill: a greedy answer's own
// tokens are each the best (probability 1, gap 0); other tokens are not.
TEST(Scheduler, ACheckScoresTheServedTokensInOnePrefill) {
  const auto prompt = prompt_of(6, 3);
  const Result served = alone(greedy(prompt, 8));
  ASSERT_EQ(served.tokens.size(), 8u);
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  auto check = [&](std::vector<int32_t> tokens) {
    GenerationParams p = greedy(prompt, 0);
    p.score_from = static_cast<int64_t>(p.prompt.size());
    p.prompt.insert(p.prompt.end(), tokens.begin(), tokens.end());
    auto stream = s.submit(p);
    std::vector<TokenScore> scores;
    for (int i = 0; i < 100; ++i) {
      s.step();
      StreamUpdate u = stream->wait(0ms);
      scores.insert(scores.end(), u.scores.begin(), u.scores.end());
      if (u.finish) {
        EXPECT_EQ(u.finish->reason, FinishReason::kStop);
        EXPECT_EQ(u.finish->n_completion, static_cast<int64_t>(tokens.size()));
        return scores;
      }
    }
    ADD_FAILURE() << "the check did not finish";
    return scores;
  };
  const size_t batches_before = runner.batches.size();
  const std::vector<TokenScore> honest = check(served.tokens);
  EXPECT_EQ(runner.batches.size(), batches_before + 1);  // one pass
  ASSERT_EQ(honest.size(), served.tokens.size());
  for (size_t i = 0; i < honest.size(); ++i) {
    EXPECT_EQ(honest[i].token, served.tokens[i]);
    EXPECT_EQ(honest[i].check.probability, 1.0);
    EXPECT_EQ(honest[i].check.gap, 0.0f);
  }
  std::vector<int32_t> invented = served.tokens;
  invented[3] = invented[3] == 100 ? 101 : 100;
  const std::vector<TokenScore> caught = check(invented);
  ASSERT_EQ(caught.size(), invented.size());
  EXPECT_EQ(caught[2].check.probability, 1.0);
  EXPECT_EQ(caught[3].check.probability, 0.0);
  EXPECT_FLOAT_EQ(caught[3].check.gap, 10.0f);

  GenerationParams bad = greedy(prompt, 0);
  bad.score_from = static_cast<int64_t>(bad.prompt.size());  // nothing after it to score
  EXPECT_THROW(s.submit(bad), SubmitError);
}

// The reference: the runner's greedy tokens, one sequence, token by token (no scheduler).
std::vector<int32_t> greedy_alone(ModelRunner& runner, const tokenizer::Tokenizer& tok,
                                  const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  std::vector<float> logits = forward_sequence(runner, prompt, 0, 256, false);
  Batch batch;
  for (int i = 0; i < n; ++i) {
    const int32_t t = engine::greedy(std::span<const float>(logits));
    if (tok.is_eog(t)) break;
    out.push_back(t);
    batch.clear();
    batch.add(t, 0, static_cast<int32_t>(prompt.size() + out.size() - 1), true);
    runner.forward(batch, logits);
  }
  return out;
}

TEST(Scheduler, GreedyOnARealModelMatchesTheRunnerAlone) {
  engine::LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 128;
  lo.n_seq = 1;
  auto single = engine::LocalRunner::open(tiny().path, lo);
  const auto& tok = *tiny().tok;
  const std::vector<std::vector<int32_t>> prompts = {tok.encode("The herd runs", false, false),
                                                     tok.encode("Hello there, how", false, false)};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) expected.push_back(greedy_alone(*single, tok, p, 12));
  lo.n_seq = 2;
  auto runner = engine::LocalRunner::open(tiny().path, lo);
  Scheduler s(*runner, tok, {}, nullptr);
  auto results = run_all(s, {s.submit(greedy(prompts[0], 12)), s.submit(greedy(prompts[1], 12))});
  EXPECT_EQ(results[0].tokens, expected[0]);
  EXPECT_EQ(results[1].tokens, expected[1]);
}

// herd eval's request: every prompt position's logits, as the runner gives them for the whole
// sequence, though the scheduler runs it in chunks of 7; nothing generated.
TEST(Scheduler, PromptLogitsAreThoseOfEveryPosition) {
  engine::LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 64;
  lo.n_seq = 1;
  const auto& tok = *tiny().tok;
  const std::vector<int32_t> prompt = prompt_of(20, 4);
  auto reference = engine::LocalRunner::open(tiny().path, lo);
  const std::vector<float> want = forward_sequence(*reference, prompt, 0, 256, true);
  auto runner = engine::LocalRunner::open(tiny().path, lo);
  SchedulerOptions so;
  so.batch_tokens = 7;
  Scheduler s(*runner, tok, so, nullptr);
  GenerationParams p;
  p.prompt = prompt;
  p.max_tokens = 0;
  p.prompt_logits = true;
  std::vector<float> got;
  int updates = 0;
  const Finish f = s.drive(*s.submit(p), [&](const StreamUpdate& u) {
    got.insert(got.end(), u.logits.begin(), u.logits.end());
    ++updates;
    return true;
  });
  EXPECT_EQ(f.reason, FinishReason::kLength);
  EXPECT_EQ(f.n_completion, 0);
  EXPECT_GE(updates, 3);  // streamed pass by pass
  EXPECT_EQ(got, want);
  // A prompt alone may fill the context; one to be continued may not.
  p.prompt = prompt_of(64, 5);
  EXPECT_NO_THROW(s.submit(p)->cancel());
  p.max_tokens = 1;
  EXPECT_THROW(s.submit(p), SubmitError);
}

// drive(): steps until the request finishes; a callback that declines cancels it.
TEST(Scheduler, DriveRunsTheRequestAndCancelsWhenTheCallerDeclines) {
  FakeRunner runner(*tiny().tok, 1, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  std::string text;
  Finish f = s.drive(*s.submit(greedy(prompt_of(5, 1), 6)), [&](const StreamUpdate& u) {
    text += u.text;
    return true;
  });
  EXPECT_EQ(f.reason, FinishReason::kLength);
  EXPECT_EQ(f.n_completion, 6);
  EXPECT_EQ(text, alone(greedy(prompt_of(5, 1), 6)).text);
  int calls = 0;
  f = s.drive(*s.submit(greedy(prompt_of(5, 2), 50)),
              [&](const StreamUpdate&) { return ++calls < 2; });
  EXPECT_EQ(f.reason, FinishReason::kCancelled);
  EXPECT_LT(f.n_completion, 50);
}

// A constraint (the server's JSON grammars are one): each reply gets a fresh filter; the
// tokens are those it allows, and the reply ends where it calls the reply whole.
TEST(Scheduler, AConstraintChoosesTheTokensAndEndsTheReply) {
  struct Only final : TokenFilter {
    int32_t token = 0;
    int accepted = 0;
    bool allows(int32_t t) override { return t == token; }
    void allowed_tokens(std::span<uint8_t> allowed) override {
      allowed[static_cast<size_t>(token)] = 1;
    }
    void accept(int32_t) override { ++accepted; }
    bool complete() const override { return accepted == 3; }
  };
  struct OnlyConstraint final : TokenConstraint {
    int32_t token = 0;
    mutable int started = 0;
    std::unique_ptr<TokenFilter> start() const override {
      ++started;
      auto f = std::make_unique<Only>();
      f->token = token;
      return f;
    }
  };
  auto constraint = std::make_shared<OnlyConstraint>();
  constraint->token = tiny().tok->encode("q", false, false).at(0);
  FakeRunner runner(*tiny().tok, 2, 4096);
  Scheduler s(runner, *tiny().tok, {}, nullptr);
  GenerationParams p = greedy(prompt_of(5, 1), 10);
  p.constraint = constraint;
  p.speculative = SpeculativeParams{4, 1, 3};  // not under a constraint
  const auto results = run_all(s, {s.submit(p), s.submit(p)});
  EXPECT_EQ(constraint->started, 2);
  for (const Result& r : results) {
    EXPECT_EQ(r.tokens, std::vector<int32_t>(3, constraint->token));
    EXPECT_EQ(r.finish->reason, FinishReason::kStop);
    EXPECT_EQ(r.finish->n_drafted, 0);
  }
}

// A model with recurrent state (Gated DeltaNet layers) cannot cut a slot back: it reuses a
// prefix only from a snapshot the scheduler had the runner keep. A follow-up that repeats
// the history continues from the end of the reply, the same prompt again from before its
// last token; both give the tokens of a cold run.
class StateThatCannotBeCutBack : public ::testing::TestWithParam<std::string> {};

// DeepSeek V4's compressed cache (a window of 8 rows, compressor rings) likewise: its window
// and rings are in the snapshot, its compressed entries of the prefix stay as they are.
TEST_P(StateThatCannotBeCutBack, ReusesSnapshotsAndMatchesColdRuns) {
  SynthOptions o;
  o.arch = GetParam();
  o.type = "f32";
  o.out_path =
      ::testing::TempDir() + "/server_" + o.arch + "_" + std::to_string(getpid()) + ".gguf";
  o.n_embd = 64;
  o.n_layer = 4;
  o.n_head = 4;
  o.n_head_kv = o.arch == "deepseek4" ? 1 : 2;
  o.n_ff = 128;
  o.threads = 2;
  if (o.arch == "deepseek4") {
    o.n_ctx = 128;
    o.sliding_window = 8;
  }
  synthesize(o);
  struct RemovedAtEnd {
    std::string path;
    ~RemovedAtEnd() { std::filesystem::remove(path); }
  } file{o.out_path};
  engine::LocalOptions lo;
  lo.threads = 2;
  lo.n_ctx = 128;
  lo.n_seq = 2;
  const auto& tok = *tiny().tok;
  auto cold = [&](const GenerationParams& p) {
    auto fresh = engine::LocalRunner::open(o.out_path, lo);
    Scheduler s(*fresh, tok, {}, nullptr);
    return run_all(s, {s.submit(p)})[0];
  };
  auto runner = engine::LocalRunner::open(o.out_path, lo);
  ASSERT_TRUE(runner->recurrent());
  Scheduler s(*runner, tok, {}, nullptr);
  auto first = greedy(prompt_of(30, 3), 6);
  first.stop_at_eog = false;  // six tokens whatever the random model says
  const auto r1 = run_all(s, {s.submit(first)})[0];
  ASSERT_EQ(r1.tokens.size(), 6u);
  EXPECT_EQ(r1.tokens, cold(first).tokens);

  auto next = first;
  next.prompt.insert(next.prompt.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t t : prompt_of(5, 9)) next.prompt.push_back(t);
  const auto r2 = run_all(s, {s.submit(next)})[0];
  EXPECT_EQ(r2.finish->n_cached, 30 + 5);  // the reply's last token was never run
  EXPECT_EQ(r2.tokens, cold(next).tokens);

  const auto r3 = run_all(s, {s.submit(first)})[0];
  EXPECT_EQ(r3.finish->n_cached, 29);
  EXPECT_EQ(r3.tokens, r1.tokens);

  // Drafts (prompt lookup: a long prompt, whose tokens the reply meets now and then): the
  // tokens of a cold run without them; refused drafts sent the state back and the kept
  // tokens ran again; a follow-up then continues from the reply's end as without drafts.
  auto plain = greedy(prompt_of(60, 5), 40);
  plain.stop_at_eog = false;
  auto drafted = plain;
  drafted.speculative = SpeculativeParams{4, 1, 3};
  const auto d1 = run_all(s, {s.submit(drafted)})[0];
  EXPECT_EQ(d1.tokens, cold(plain).tokens);
  EXPECT_GT(d1.finish->n_drafted, d1.finish->n_draft_accepted);  // a refusal was rolled back
  auto after = drafted;
  after.prompt.insert(after.prompt.end(), d1.tokens.begin(), d1.tokens.end());
  for (int32_t t : prompt_of(3, 7)) after.prompt.push_back(t);
  after.max_tokens = 10;
  const auto d2 = run_all(s, {s.submit(after)})[0];
  auto after_plain = after;
  after_plain.speculative.reset();
  EXPECT_EQ(d2.tokens, cold(after_plain).tokens);
  EXPECT_GT(d2.finish->n_cached, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, StateThatCannotBeCutBack,
                         ::testing::Values(std::string("qwen35"), std::string("deepseek4")));

}  // namespace
}  // namespace herd::engine::scheduler_test
