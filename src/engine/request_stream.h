// What a request produces, as the scheduler hands it to the one reader of its stream: text
// as it completes, the tokens behind it, logprobs, a check's scores, prompt logits, and the
// finish. The scheduler (engine thread) writes, a reader (an HTTP thread, or the caller of
// Scheduler::drive) reads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"

namespace herd::engine {

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;  // best first
};

struct TokenScore {
  int32_t token = 0;
  DrawCheck check;
};

enum class FinishReason { kStop, kLength, kCancelled, kError };
std::string_view finish_reason_name(FinishReason reason);

struct Finish {
  FinishReason reason = FinishReason::kStop;
  std::string error;             // kError: what went wrong
  int64_t n_prompt = 0;          // prompt tokens
  int64_t n_cached = 0;          // of which were reused from the slot's cache
  int64_t n_completion = 0;      // generated tokens (a final end-of-generation token not counted)
  double ttft_seconds = 0;       // from submit() to the first generated token
  double prefill_seconds = 0;    // from its first prompt pass to the end of its last
  double decode_seconds = 0;     // from the first to the last generated token
  int64_t n_drafted = 0;         // speculative draft tokens the target checked
  int64_t n_draft_accepted = 0;  // of which it kept
  int64_t n_target_steps = 0;    // forward passes that produced its generated tokens
  // Tokens run again because the runner lost its slots' states (a pod formed again).
  int64_t n_replayed = 0;
};

// What a request produced since the last read.
struct StreamUpdate {
  std::string text;                    // complete UTF-8 text, stop strings held back
  std::vector<int32_t> tokens;         // the tokens behind it
  std::vector<TokenLogprob> logprobs;  // one per token when logprobs were asked for
  std::vector<TokenScore> scores;      // a check's (GenerationParams::score_from)
  std::vector<float> logits;           // [positions][n_vocab] (GenerationParams::prompt_logits)
  std::optional<Finish> finish;        // set once, in the last update
};

// Shared by the scheduler (writer, engine thread) and one reader (an HTTP thread).
// Thread-safe.
class RequestStream {
 public:
  // Returns what arrived, waiting up to `timeout` for something; an empty update (no
  // text, no finish) means the wait timed out.
  StreamUpdate wait(std::chrono::milliseconds timeout);
  // The same into `into` (cleared first), trading buffers with the stream: a reader that
  // keeps one update causes no allocation per token once warm.
  void wait(std::chrono::milliseconds timeout, StreamUpdate& into);
  // Asks the scheduler to stop this request and free its slot; a finish with kCancelled
  // follows (unless it had finished already).
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Engine side. token < 0: text only (what was held back at the end).
  void publish(const std::string& text, int32_t token, const TokenLogprob* logprob);
  void publish_score(const TokenScore& score);
  void publish_logits(std::span<const float> row);
  void finish(const Finish& finish);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  StreamUpdate pending_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace herd::engine
