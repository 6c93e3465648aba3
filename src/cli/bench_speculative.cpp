#include "cli/bench_speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/bench_stats.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace herd::cli {
namespace {

struct Run {
  std::vector<int32_t> tokens;
  engine::Finish finish;
  double decode_tok_s = 0;
};

// One greedy request through a scheduler, to its end: its tokens, its finish and its
// decode speed (from the first generated token to the last).
Run generate(engine::ModelRunner& runner, engine::ModelRunner* draft,
             const tokenizer::Tokenizer& tok, const std::vector<int32_t>& prompt, int64_t n_gen,
             int k, bool mtp) {
  engine::SchedulerOptions so;
  so.draft = draft;
  engine::Scheduler s(runner, tok, so, nullptr);
  engine::GenerationParams p;
  p.prompt = prompt;
  p.max_tokens = n_gen;
  p.sampler.temperature = 0;
  p.stop_at_eog = false;
  if (k > 0) {
    p.speculative = mtp     ? engine::SpeculativeParams{0, 1, 3, 0, k}
                    : draft ? engine::SpeculativeParams{0, 1, 3, k}
                            : engine::SpeculativeParams{k};
  }
  auto stream = s.submit(p);
  Run run;
  run.finish = s.drive(*stream, [&](const engine::StreamUpdate& u) {
    run.tokens.insert(run.tokens.end(), u.tokens.begin(), u.tokens.end());
    return true;
  });
  if (run.finish.reason == engine::FinishReason::kError) {
    throw Error("bench", "generation failed: " + run.finish.error);
  }
  const double t = run.finish.decode_seconds;
  run.decode_tok_s = t > 0 ? static_cast<double>(run.finish.n_completion - 1) / t : 0;
  return run;
}

}  // namespace

SpeculativeBench bench_speculative(engine::ModelRunner& runner, engine::ModelRunner* draft,
                                   const std::vector<int32_t>& prompt, int64_t n_gen, int k,
                                   int reps, bool mtp) {
  SpeculativeBench b;
  b.kind = mtp ? "mtp" : draft ? "draft" : "lookup";
  b.k = k;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(runner.file());
  // (1) k + 1 rows against 1 at the prompt's end (the rows' cache entries are overwritten).
  std::vector<float> logits;
  engine::Batch batch;
  const auto pos = static_cast<int32_t>(prompt.size());
  std::vector<double> one, many;
  for (int r = 0; r < reps + 1; ++r) {
    for (int rows : {1, k + 1}) {
      batch.clear();
      for (int i = 0; i < rows; ++i) batch.add(prompt[size_t(i) % prompt.size()], 0, pos + i, true);
      double t0 = now_seconds();
      try {
        runner.forward(batch, logits);
      } catch (const engine::StatesLost&) {
        // A pod formed again: the probe's rows need no earlier states; the pass runs now.
        t0 = now_seconds();
        runner.forward(batch, logits);
      }
      if (r > 0) (rows == 1 ? one : many).push_back(now_seconds() - t0);  // first: warm-up
    }
  }
  b.one_ms = 1e3 * median(one);
  b.verify_ms = 1e3 * median(many);
  // (2) Plain and drafted generations, alternated.
  std::vector<double> plain, drafted;
  for (int r = 0; r < reps; ++r) {
    const Run p = generate(runner, nullptr, tok, prompt, n_gen, 0, false);
    const Run d = generate(runner, draft, tok, prompt, n_gen, k, mtp);
    plain.push_back(p.decode_tok_s);
    drafted.push_back(d.decode_tok_s);
    b.same_tokens = b.same_tokens && p.tokens == d.tokens;
    if (r + 1 == reps) {
      b.drafted = d.finish.n_drafted;
      b.kept = d.finish.n_draft_accepted;
      b.generated = d.finish.n_completion;
      b.acceptance =
          b.drafted > 0 ? static_cast<double>(b.kept) / static_cast<double>(b.drafted) : 0;
      b.tokens_per_forward = d.finish.n_target_steps > 0
                                 ? static_cast<double>(d.finish.n_completion) /
                                       static_cast<double>(d.finish.n_target_steps)
                                 : 0;
    }
  }
  b.plain_tok_s = median(plain);
  b.drafted_tok_s = median(drafted);
  return b;
}

nlohmann::ordered_json SpeculativeBench::json() const {
  return {{"kind", kind},
          {"k", k},
          {"acceptance", acceptance},
          {"drafted", drafted},
          {"kept", kept},
          {"tokens_per_target_forward", tokens_per_forward},
          {"verify_ms", verify_ms},
          {"one_token_ms", one_ms},
          {"verify_cost_ratio", one_ms > 0 ? verify_ms / one_ms : 0},
          {"plain_decode_tok_s", plain_tok_s},
          {"speculative_decode_tok_s", drafted_tok_s},
          {"speedup", plain_tok_s > 0 ? drafted_tok_s / plain_tok_s : 0},
          {"same_tokens", same_tokens}};
}

void SpeculativeBench::print() const {
  std::printf("verify       %8.2f ms for %d tokens, %.2f ms for 1: %.2fx the cost\n", verify_ms,
              k + 1, one_ms, one_ms > 0 ? verify_ms / one_ms : 0.0);
  std::printf("%-12s %lld of %lld drafted tokens kept (%.0f%%), %.2f tokens per target forward\n",
              kind, static_cast<long long>(kept), static_cast<long long>(drafted), 100 * acceptance,
              tokens_per_forward);
  std::printf("speculative  %8.1f tok/s decode against %.1f plain: %.2fx%s\n", drafted_tok_s,
              plain_tok_s, plain_tok_s > 0 ? drafted_tok_s / plain_tok_s : 0.0,
              same_tokens ? " (the same tokens)" : " (TOKENS DIFFER)");
}

}  // namespace herd::cli
