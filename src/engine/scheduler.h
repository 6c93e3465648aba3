// Scheduler: continuous batching of many generation requests over one ModelRunner.
//
// One engine thread calls step() in a loop. Every step builds ONE Batch: the pending
// decode token of every running request first, then chunks of the prompts still being
// prefilled, up to a token budget (so a long prompt never stalls the others' decoding for
// more than one bounded pass). Requests join and leave between steps. Waiting requests are
// admitted first come, first served, into the free KV slot whose cached tokens share the
// longest prefix with the prompt; only the rest of the prompt is prefilled (a multi-turn
// chat does not prefill its history again).
//
// A runner that loses its slots' states (a pod formed again after a lost node) says so
// (StatesLost): every running request then runs its prompt and what it has generated so far
// again from position 0, the prompt by prefill, the reply's tokens as the tokens its slot is
// behind by, within the batch budget; nothing is published twice, and the streams only see a
// pause.
//
// A model with recurrent state (linear-attention layers) cannot cut a slot back to a
// prefix: there the scheduler has the runner keep snapshots of a slot at checkpoints (every
// kCheckpointEvery prompt tokens, before a prompt's last token, at the end of a reply) and
// reuses the longest prefix it holds a snapshot of.
//
// It is the one generation loop: `herd serve` runs it on an engine thread and reads each
// RequestStream from an HTTP thread; `herd run`, `herd eval` and `herd bench` submit their
// requests and drive it with step() on their own thread (drive()). It knows nothing of HTTP:
// cancel() on a stream frees the request's slot at the next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/request_stream.h"
#include "engine/runner.h"
#include "engine/sampler.h"
#include "engine/scheduler_observer.h"
#include "engine/speculative.h"
#include "engine/token_filter.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace herd::engine {

struct GenerationParams {
  std::vector<int32_t> prompt;  // REQUIRES: not empty
  int64_t max_tokens = -1;      // < 0: until the context is full; 0: the prompt only
  // Every prompt position's logits are published (StreamUpdate::logits; `herd eval`), the
  // whole prompt run (no cached prefix reused).
  bool prompt_logits = false;
  // The whole prompt is run, no cached prefix reused (herd bench times prefill this way).
  bool cold = false;
  SamplerParams sampler;
  std::vector<std::string> stop;  // never streamed; generation ends before them
  int top_logprobs = -1;          // < 0: no logprobs; 0..20: chosen token plus that many
  bool render_special = false;    // decode control tokens as text (tool-call markers)
  bool stop_at_eog = true;        // false: end-of-generation tokens are generated as text
  // When set, every token is one the constraint's filter allows (a JSON schema's, a forced
  // tool call's), and the reply ends (kStop) once the filter calls it whole; an end token is
  // allowed only then.
  std::shared_ptr<const TokenConstraint> constraint;
  // > 0: a check, not a generation (a hub's verification, docs/network.md). The prompt is
  // a served request's prompt and then the tokens served for it, from this index on; each
  // of those is scored as the sampler's draw (DrawCheck) from the logits before it,
  // all in one prefill, and the request finishes. REQUIRES: < prompt.size(); no constraint.
  int64_t score_from = 0;
  // Speculative decoding (engine/speculative.h): off when unset. The scheduler does not draft
  // where it cannot help or cannot roll back: under a constraint, with logprobs, for a check,
  // or on a model with recurrent state.
  std::optional<SpeculativeParams> speculative;
};

// submit() refusals: the caller maps these to HTTP statuses.
class SubmitError : public Error {
 public:
  enum class Kind { kQueueFull, kPromptTooLong, kInvalid, kShuttingDown };
  SubmitError(Kind kind, const std::string& message) : Error("scheduler", message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct SchedulerOptions {
  int64_t max_queue = 64;      // waiting (not yet admitted) requests; more are refused
  int64_t batch_tokens = 256;  // tokens per forward pass: decode tokens, then prompt chunks
  // A draft model for speculative decoding (SpeculativeParams::draft): the same vocabulary,
  // at least as many slots, no recurrent state; it drafts greedily, each slot of it following
  // the target's slot of the same index. Null: requests draft by prompt lookup only.
  ModelRunner* draft = nullptr;
};

class Scheduler {
 public:
  // REQUIRES: runner and tokenizer outlive the scheduler; observer may be null.
  Scheduler(ModelRunner& runner, const tokenizer::Tokenizer& tokenizer,
            const SchedulerOptions& options, SchedulerObserver* observer);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws SubmitError when the queue is full, the prompt does not fit
  // the context, or the scheduler is shutting down. Thread-safe.
  std::shared_ptr<RequestStream> submit(GenerationParams params);

  // Runs one forward pass over everything that is ready. Returns false when there was
  // nothing to do. Engine thread only (tests call it directly).
  bool step();

  // The engine thread: steps while there is work, sleeps otherwise, and returns once
  // shutdown() was called and every queued and running request has finished.
  void run();
  // For a caller with no engine thread (herd run, eval, bench): steps on this thread until
  // `stream`'s request has finished, and hands each update to on_update as it comes (the
  // last one holds the finish); on_update returning false cancels the request. Other
  // requests queued meanwhile advance too. Returns the finish.
  Finish drive(RequestStream& stream, const std::function<bool(const StreamUpdate&)>& on_update);

  // Refuses new requests from now on and lets run() return when the rest are done.
  void shutdown();
  // shutdown(), and ends every queued and running request at the next step with an error
  // naming `reason` (the pod swaps its model and will not wait longer). Thread-safe.
  void abort(const std::string& reason);

  // Why the last forward pass failed, while no pass has succeeded since (empty: healthy).
  // A failing model (later: a lost peer) makes /health say "degraded". Thread-safe.
  std::string failure() const;
  // The runner's reason it cannot run now (ModelRunner::unavailable), or empty.
  std::string unavailable() const { return runner_.unavailable(); }

  int64_t n_slots() const { return static_cast<int64_t>(slots_.size()); }
  int64_t n_ctx() const { return runner_.n_ctx(); }  // tokens a sequence holds
  int64_t n_queued() const;
  int64_t n_running() const { return n_running_.load(); }
  // Forward passes since start, and the wall time they took (the one-node view of
  // GET /api/cluster: one stage's tokens and compute time). Thread-safe.
  struct ForwardStats {
    int64_t batches = 0;
    int64_t tokens = 0;
    double seconds = 0;
  };
  ForwardStats forward_stats() const;
  // The tokens slot `slot` holds in its KV cache (for tests). Engine thread only.
  const std::vector<int32_t>& slot_tokens(int32_t slot) const { return slots_[slot].cached; }
  // The last batch step() ran (for tests). Engine thread only.
  const Batch& last_batch() const { return batch_; }

 private:
  struct Active;
  struct Slot {
    std::vector<int32_t> cached;  // tokens at positions [0, n) of this KV slot
    Active* active = nullptr;
    uint64_t last_used = 0;
    // The MTP head's KV rows of positions [0, mtp_rows) hold this slot's tokens (the head has
    // seen them: scheduler_mtp.cpp); a prefix reused past them would leave the head blind.
    size_t mtp_rows = 0;
  };
  struct Waiting {
    GenerationParams params;
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point submitted;
  };

  // Recurrent models: prompt positions whose state the runner keeps (the prefix a later
  // request may continue from). Often enough that a shared system prompt is reused, rarely
  // enough that a prefill runs in long chunks.
  static constexpr size_t kCheckpointEvery = 256;
  // The last checkpoint of `active`'s prompt below `limit`, and the first after its
  // n_prefilled.
  static size_t checkpoint_before(const Active& active, size_t limit);
  static size_t next_checkpoint(const Active& active);

  void admit();
  void finish(Active& active, FinishReason reason, const std::string& error = {});
  void sample_and_emit(Active& active, const float* logits);
  // Emits a chosen token (the sampler has it already when !into_sampler); false when that
  // finished the request. Sets nothing for the next step.
  bool emit(Active& active, int32_t token, std::span<const float> row, bool into_sampler);
  // The pending token and a draft went through the model: rows [k + 1][n_vocab].
  void check_and_emit(Active& active, const float* rows);
  // Appends the draft model's next token for `active`: greedy, or drawn from the draft's
  // distribution where the request samples.
  void draw_draft(Active& active, std::span<const float> logits);
  bool speculates(const Active& active) const;
  // MTP drafting (scheduler_mtp.cpp): whether `active` drafts with the model's MTP head; the
  // prefix of `slot` a request that does may reuse (the head must hold the row of the first
  // position it does not run again); and after a forward, every position the MTP requests
  // kept through the head, which drafts their next step.
  bool drafts_by_mtp(const Active& active) const;
  static size_t mtp_keep(const Slot& slot, size_t best_prefix, size_t keep);
  void feed_mtp();
  // Runs the draft model for the requests whose `draft` it should fill (their slots caught up
  // to their tokens, then one token per round, greedily), at most k[i] tokens each.
  void run_draft_model(const std::vector<Active*>& active, const std::vector<int64_t>& k);
  void score_and_emit(Active& active, size_t position, const float* logits);
  // The runner threw StatesLost (`why`): every request runs its tokens again from position 0
  // (scheduler.cpp says how); one that lost them more than kMaxStatesLost times ends with an
  // error.
  void states_lost(const std::string& why);
  static constexpr int kMaxStatesLost = 8;
  void drop_cancelled();

  ModelRunner& runner_;
  const tokenizer::Tokenizer& tokenizer_;
  SchedulerOptions options_;
  SchedulerObserver* observer_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Active>> running_;  // in admission order
  uint64_t clock_ = 0;                            // admission counter for LRU slot choice

  mutable std::mutex mutex_;  // guards queue_, stopping_, failure_ and forward_stats_
  std::string failure_;
  ForwardStats forward_stats_;  // guarded by mutex_
  std::condition_variable cv_;
  std::deque<Waiting> queue_;
  bool stopping_ = false;
  std::string abort_reason_;  // guarded by mutex_; set: every request ends (abort())
  std::atomic<int64_t> n_running_{0};

  Batch batch_;
  std::vector<float> logits_;
  // step()'s working lists, kept so that a step allocates nothing once warm: the request and
  // position of each logits row, the decoding requests, those the draft model drafts for
  // (and how many tokens each), the prompt chunks (request, tokens).
  std::vector<Active*> rows_;
  std::vector<size_t> row_positions_;
  std::vector<Active*> decoding_, by_draft_model_;
  std::vector<int64_t> draft_k_;
  std::vector<std::pair<Active*, size_t>> prefills_;
  std::vector<std::pair<Active*, size_t>> behind_;  // slots behind, run up to a position
  std::vector<size_t> draft_fed_, draft_rows_;      // run_draft_model's
  DraftScratch draft_scratch_;
  // The draft model's slots: the tokens at positions [0, n) of each (options_.draft).
  std::vector<std::vector<int32_t>> draft_cached_;
  std::vector<MtpStart> mtp_starts_;  // feed_mtp's
  std::vector<MtpDraft> mtp_drafts_;
  Batch draft_batch_;
  std::vector<float> draft_logits_;
};

}  // namespace herd::engine
