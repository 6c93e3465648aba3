#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "engine/scheduler_active.h"
#include "engine/speculative.h"
#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace herd::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// log-softmax of the chosen token and the `n_top` most likely tokens, from raw logits.
TokenLogprob logprobs_of(std::span<const float> logits, int32_t token, int n_top) {
  float max = logits[0];
  for (float l : logits) max = std::max(max, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprob out;
  out.token = token;
  out.logprob = logits[static_cast<size_t>(token)] - log_z;
  if (n_top > 0) {
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    const size_t k = std::min(ids.size(), static_cast<size_t>(n_top));
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](int32_t a, int32_t b) {
                        const float la = logits[static_cast<size_t>(a)];
                        const float lb = logits[static_cast<size_t>(b)];
                        return la > lb || (la == lb && a < b);
                      });
    for (size_t i = 0; i < k; ++i) {
      out.top.push_back({ids[i], logits[static_cast<size_t>(ids[i])] - log_z});
    }
  }
  return out;
}

}  // namespace

Scheduler::Scheduler(ModelRunner& runner, const tokenizer::Tokenizer& tokenizer,
                     const SchedulerOptions& options, SchedulerObserver* observer)
    : runner_(runner),
      tokenizer_(tokenizer),
      options_(options),
      observer_(observer),
      slots_(static_cast<size_t>(runner.n_seq())) {
  options_.batch_tokens = std::max<int64_t>(options_.batch_tokens, 1);
  // A draft check's distributions hold the tokens the sampler's chain keeps (one when greedy,
  // top_k at most otherwise): room for the usual ones before the first check.
  draft_scratch_.target.reserve(256);
  draft_scratch_.rest.reserve(256);
  if (ModelRunner* d = options_.draft) {
    // The same vocabulary: the same number of tokens with the same texts (a draft's ids mean
    // the target's tokens).
    const tokenizer::Tokenizer draft_tokens = tokenizer::Tokenizer::from_gguf(d->file());
    bool same = draft_tokens.n_vocab() == tokenizer.n_vocab() &&
                d->hparams().n_vocab == runner.hparams().n_vocab;
    for (int32_t id = 0; same && id < tokenizer.n_vocab(); ++id) {
      same = draft_tokens.token_text(id) == tokenizer.token_text(id);
    }
    if (!same) {
      throw Error("scheduler", "the draft model's vocabulary (" +
                                   std::to_string(draft_tokens.n_vocab()) +
                                   " tokens) is not the model's (" +
                                   std::to_string(tokenizer.n_vocab()) + " tokens)");
    }
    if (d->n_seq() < runner.n_seq() || d->n_ctx() < runner.n_ctx() || d->recurrent()) {
      throw Error("scheduler", "the draft model needs " + std::to_string(runner.n_seq()) +
                                   " slots of " + std::to_string(runner.n_ctx()) +
                                   " positions and no recurrent state");
    }
    draft_cached_.resize(static_cast<size_t>(runner.n_seq()));
  }
}

Scheduler::~Scheduler() = default;

Scheduler::ForwardStats Scheduler::forward_stats() const {
  std::lock_guard lock(mutex_);
  return forward_stats_;
}

std::string Scheduler::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

int64_t Scheduler::n_queued() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(queue_.size());
}

std::shared_ptr<RequestStream> Scheduler::submit(GenerationParams params) {
  if (params.prompt.empty()) {
    throw SubmitError(SubmitError::Kind::kInvalid, "the prompt has no tokens");
  }
  const int64_t n_ctx = runner_.n_ctx();
  // Room for the prompt and at least one generated token (a prompt alone fills it).
  const bool prompt_only = params.max_tokens == 0;
  if (static_cast<int64_t>(params.prompt.size()) > n_ctx - (prompt_only ? 0 : 1)) {
    throw SubmitError(SubmitError::Kind::kPromptTooLong,
                      "the prompt has " + std::to_string(params.prompt.size()) +
                          " tokens but the context holds " + std::to_string(n_ctx) +
                          (prompt_only ? "" : " (prompt and at least one generated token)"));
  }
  const int32_t n_vocab = static_cast<int32_t>(runner_.hparams().n_vocab);
  for (int32_t t : params.prompt) {
    if (t < 0 || t >= n_vocab) {
      throw SubmitError(SubmitError::Kind::kInvalid, "token id " + std::to_string(t) +
                                                         " is outside the vocabulary [0, " +
                                                         std::to_string(n_vocab) + ")");
    }
  }
  if (params.score_from < 0 ||
      (params.score_from > 0 &&
       (params.score_from >= static_cast<int64_t>(params.prompt.size()) || params.constraint))) {
    throw SubmitError(SubmitError::Kind::kInvalid,
                      "a check scores tokens after a prompt of at least one token, unconstrained");
  }
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard lock(mutex_);
    if (stopping_)
      throw SubmitError(SubmitError::Kind::kShuttingDown, "the server is shutting down");
    // Requests that free slots will take at the next step do not count as waiting.
    const int64_t free_slots = std::max<int64_t>(0, n_slots() - n_running_.load());
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue + free_slots) {
      throw SubmitError(SubmitError::Kind::kQueueFull, "the queue is full (" +
                                                           std::to_string(options_.max_queue) +
                                                           " requests waiting); retry later");
    }
    queue_.push_back({std::move(params), stream, Clock::now()});
    if (observer_) observer_->set_queue(static_cast<int64_t>(queue_.size()), n_running_.load());
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
}

void Scheduler::abort(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abort_reason_ = reason.empty() ? "aborted" : reason;
  }
  cv_.notify_all();
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
      if (stopping_ && queue_.empty() && running_.empty()) return;
    }
    if (!step()) {
      // Nothing runnable (every waiting request was cancelled): wait for news.
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, std::chrono::milliseconds(50));
    }
  }
}

Finish Scheduler::drive(RequestStream& stream,
                        const std::function<bool(const StreamUpdate&)>& on_update) {
  StreamUpdate u;
  for (;;) {
    const bool stepped = step();
    stream.wait(std::chrono::milliseconds(0), u);
    const bool news =
        !u.text.empty() || !u.tokens.empty() || !u.scores.empty() || !u.logits.empty() || u.finish;
    if (news && !on_update(u)) stream.cancel();
    if (u.finish) return *u.finish;
    if (!stepped && !stream.cancelled() && running_.empty() && n_queued() == 0) {
      throw Error("scheduler", "a request was neither queued nor running, and never finished");
    }
  }
}

void Scheduler::admit() {
  std::lock_guard lock(mutex_);
  while (!queue_.empty()) {
    // First come, first served: the head of the queue takes a slot or everyone waits.
    Waiting& w = queue_.front();
    // The free slot sharing the longest prefix; among equals, the least recently used
    // (so that other conversations' caches live longest).
    int32_t best = -1;
    size_t best_prefix = 0;
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s].active) continue;
      const size_t prefix = common_prefix(slots_[s].cached, w.params.prompt);
      if (best < 0 || prefix > best_prefix ||
          (prefix == best_prefix && slots_[s].last_used < slots_[best].last_used)) {
        best = static_cast<int32_t>(s);
        best_prefix = prefix;
      }
    }
    if (best < 0) break;
    auto active = std::make_unique<Active>(std::move(w.params), std::move(w.stream), tokenizer_);
    active->submitted = w.submitted;
    if (active->params.constraint) active->filter = active->params.constraint->start();
    if (options_.draft && active->params.sampler.temperature > 0) {
      SamplerParams q = active->params.sampler;
      q.repeat_penalty = 1;
      q.presence_penalty = q.frequency_penalty = 0;
      q.seed = q.seed * 0x9E3779B97F4A7C15ull + 1;  // its own draws, not the target's
      active->draft_sampler.emplace(q);
    }
    queue_.pop_front();
    // At least the last prompt token runs again: its logits choose the first token (a
    // check's: the token before the first it scores).
    const size_t first_logits = active->params.prompt_logits || active->params.cold ? 0
                                : active->params.score_from > 0
                                    ? static_cast<size_t>(active->params.score_from) - 1
                                    : active->params.prompt.size() - 1;
    size_t keep = std::min(best_prefix, first_logits);
    if (drafts_by_mtp(*active))
      keep = mtp_keep(slots_[static_cast<size_t>(best)], best_prefix, keep);
    // A recurrent state continues only from a snapshot (none: from position 0).
    if (runner_.recurrent()) keep = static_cast<size_t>(runner_.restore_state(best, keep));
    Slot& slot = slots_[static_cast<size_t>(best)];
    slot.cached.resize(keep);
    slot.mtp_rows = std::min(slot.mtp_rows, keep);
    // Room for the whole context now, not a reallocation now and then while decoding.
    slot.cached.reserve(static_cast<size_t>(runner_.n_ctx()));
    if (active->params.speculative) active->context.reserve(static_cast<size_t>(runner_.n_ctx()));
    slot.active = active.get();
    slot.last_used = ++clock_;
    active->slot = best;
    active->n_prefilled = keep;
    active->state_len = keep;
    active->n_cached = static_cast<int64_t>(keep);
    // The sampler's penalties look at the tokens before each draw (a check accepts the
    // tokens it scores as it goes).
    const size_t n_seen = active->params.score_from > 0
                              ? static_cast<size_t>(active->params.score_from)
                              : active->params.prompt.size();
    for (size_t i = 0; i < n_seen; ++i) active->sampler.accept(active->params.prompt[i]);
    running_.push_back(std::move(active));
  }
  n_running_.store(static_cast<int64_t>(running_.size()));
  if (observer_) observer_->set_queue(static_cast<int64_t>(queue_.size()), n_running_.load());
}

void Scheduler::drop_cancelled() {
  std::string aborted;
  {
    // Waiting requests whose clients left give their places up at once (all after abort()).
    std::lock_guard lock(mutex_);
    aborted = abort_reason_;
    std::erase_if(queue_, [&](const Waiting& w) {
      if (!w.stream->cancelled() && aborted.empty()) return false;
      Finish f;
      f.reason = aborted.empty() ? FinishReason::kCancelled : FinishReason::kError;
      f.error = aborted;
      f.n_prompt = static_cast<int64_t>(w.params.prompt.size());
      w.stream->finish(f);
      return true;
    });
  }
  for (auto& a : running_) {
    if (!a->done && a->stream->cancelled()) finish(*a, FinishReason::kCancelled);
    if (!a->done && !aborted.empty()) finish(*a, FinishReason::kError, aborted);
  }
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
}

void Scheduler::finish(Active& a, FinishReason reason, const std::string& error) {
  if (a.done) return;
  a.done = true;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    // What the decoder and the stop matcher still hold belongs to the text.
    std::string tail;
    if (!a.stops.stopped()) tail = a.stops.push(a.decoder.flush());
    tail += a.stops.flush();
    if (!tail.empty()) a.stream->publish(tail, -1, nullptr);
  }
  Finish f;
  f.reason = reason;
  f.error = error;
  f.n_prompt = static_cast<int64_t>(a.params.prompt.size());
  f.n_cached = a.n_cached;
  f.n_completion = a.n_generated;
  f.n_drafted = a.n_drafted;
  f.n_draft_accepted = a.n_draft_accepted;
  f.n_target_steps = a.n_target_steps;
  f.n_replayed = a.n_replayed;
  if (a.n_prefilled == a.params.prompt.size() && a.prefill_end > a.prefill_start) {
    f.prefill_seconds = seconds_between(a.prefill_start, a.prefill_end);
  }
  const auto now = Clock::now();
  if (a.n_generated > 0) {
    f.ttft_seconds = seconds_between(a.submitted, a.first_token);
    f.decode_seconds = seconds_between(a.first_token, now);
  }
  Slot& slot = slots_[static_cast<size_t>(a.slot)];
  slot.active = nullptr;
  slot.last_used = ++clock_;
  if (reason == FinishReason::kError) slot.cached.clear();  // its KV entries are unknown
  // The runner behind the slot's tokens (a recurrent state sent back by a refused draft, a
  // slot running its tokens again after its states were lost): the slot holds what it has.
  if (a.state_len < slot.cached.size()) slot.cached.resize(a.state_len);
  // The reply's end: where a follow-up that repeats the reply continues.
  if ((reason == FinishReason::kStop || reason == FinishReason::kLength) && runner_.recurrent() &&
      a.n_prefilled == a.params.prompt.size()) {
    runner_.save_state(a.slot, static_cast<int64_t>(slot.cached.size()));
  }
  a.stream->finish(f);
}

size_t Scheduler::checkpoint_before(const Active& a, size_t limit) {
  // The last checkpoint below `limit`: a multiple of kCheckpointEvery, or the position
  // before the prompt's last token (which always runs again for its logits).
  const size_t last = a.params.prompt.size() - 1;
  size_t best = (limit - 1) / kCheckpointEvery * kCheckpointEvery;
  if (last < limit && last > best) best = last;
  return best;
}

size_t Scheduler::next_checkpoint(const Active& a) {
  const size_t from = a.n_prefilled;
  const size_t last = a.params.prompt.size() - 1;
  size_t next = (from / kCheckpointEvery + 1) * kCheckpointEvery;
  if (last > from && last < next) next = last;
  return next;
}

void Scheduler::sample_and_emit(Active& a, const float* logits) {
  const auto n_vocab = static_cast<size_t>(runner_.hparams().n_vocab);
  std::span<const float> row(logits, n_vocab);
  const int32_t token = a.sampler.sample(row, a.filter.get());
  if (token < 0) {
    finish(a, FinishReason::kError,
           "no token of the vocabulary continues the reply within its JSON schema");
    return;
  }
  ++a.n_target_steps;
  if (emit(a, token, row, true)) a.next_token = token;
}

bool Scheduler::emit(Active& a, int32_t token, std::span<const float> row, bool into_sampler) {
  const auto now = Clock::now();
  if (a.n_generated == 0) {
    a.first_token = now;
    if (observer_) observer_->observe_ttft(seconds_between(a.submitted, now));
  }
  // Under a constraint an end token is allowed only where the reply is whole: it ends it.
  if ((a.params.stop_at_eog || a.filter) && tokenizer_.is_eog(token)) {
    finish(a, FinishReason::kStop);
    return false;
  }
  ++a.n_generated;
  if (observer_) observer_->add_completion_tokens(1);
  if (into_sampler) a.sampler.accept(token);
  if (a.filter) a.filter->accept(token);
  TokenLogprob lp;
  if (a.params.top_logprobs >= 0) lp = logprobs_of(row, token, a.params.top_logprobs);
  const std::string text = a.stops.push(a.decoder.push(token));
  a.stream->publish(text, token, a.params.top_logprobs >= 0 ? &lp : nullptr);
  if (a.stops.stopped() || (a.filter && a.filter->complete())) {
    finish(a, FinishReason::kStop);
    return false;
  }
  if (a.params.max_tokens >= 0 && a.n_generated >= a.params.max_tokens) {
    finish(a, FinishReason::kLength);
    return false;
  }
  if (static_cast<int64_t>(slots_[static_cast<size_t>(a.slot)].cached.size()) >= runner_.n_ctx()) {
    finish(a, FinishReason::kLength);  // the context is full
    return false;
  }
  return true;
}

bool Scheduler::speculates(const Active& a) const {
  const bool asked =
      a.params.speculative &&
      (a.params.speculative->lookup > 0 || (a.params.speculative->draft > 0 && options_.draft) ||
       (a.params.speculative->mtp > 0 && runner_.mtp_layers() > 0));
  return asked && !a.filter && a.params.top_logprobs < 0 && a.params.score_from == 0 &&
         (!runner_.recurrent() || runner_.holds_states());
}

void Scheduler::run_draft_model(const std::vector<Active*>& active, const std::vector<int64_t>& k) {
  ModelRunner& d = *options_.draft;
  const auto n_vocab = static_cast<size_t>(d.hparams().n_vocab);
  const int64_t n_ctx = d.n_ctx();
  // Catch up: each slot of the draft gets the request's tokens it lacks (after the longest
  // prefix it holds: what it drafted and the target refused is overwritten), in chunks,
  // logits for each request's last token only.
  std::vector<size_t>& fed = draft_fed_;
  fed.assign(active.size(), 0);
  for (;;) {
    draft_batch_.clear();
    std::vector<size_t>& rows = draft_rows_;  // which request each logits row is for
    rows.clear();
    for (size_t i = 0; i < active.size(); ++i) {
      Active& a = *active[i];
      std::vector<int32_t>& held = draft_cached_[static_cast<size_t>(a.slot)];
      if (fed[i] == 0) {
        held.resize(common_prefix(held, a.context));
        if (held.size() == a.context.size()) held.pop_back();  // its logits are wanted again
      }
      const size_t begin = held.size();
      const auto room = static_cast<size_t>(options_.batch_tokens - draft_batch_.size());
      const size_t n = std::min(a.context.size() - begin, room);
      for (size_t j = 0; j < n; ++j) {
        const size_t pos = begin + j;
        const bool last = pos + 1 == a.context.size();
        draft_batch_.add(a.context[pos], a.slot, static_cast<int32_t>(pos), last);
        held.push_back(a.context[pos]);
        if (last) rows.push_back(i);
      }
      fed[i] = 1;
      if (draft_batch_.size() >= options_.batch_tokens) break;
    }
    if (draft_batch_.size() == 0) break;
    d.forward(draft_batch_, draft_logits_);
    // The rows of requests now caught up: their first draft token.
    for (size_t r = 0; r < rows.size(); ++r) {
      draw_draft(*active[rows[r]], {draft_logits_.data() + r * n_vocab, n_vocab});
    }
    bool behind = false;
    for (size_t i = 0; i < active.size(); ++i) {
      behind = behind || draft_cached_[static_cast<size_t>(active[i]->slot)].size() <
                             active[i]->context.size();
    }
    if (!behind) break;
  }
  // Then one token per round for the requests that want more, the last one drafted going in.
  for (;;) {
    draft_batch_.clear();
    std::vector<size_t>& rows = draft_rows_;
    rows.clear();
    for (size_t i = 0; i < active.size(); ++i) {
      Active& a = *active[i];
      std::vector<int32_t>& held = draft_cached_[static_cast<size_t>(a.slot)];
      if (a.draft.empty() || static_cast<int64_t>(a.draft.size()) >= k[i]) continue;
      const int64_t pos = static_cast<int64_t>(held.size());
      if (pos + 1 >= n_ctx) continue;
      draft_batch_.add(a.draft.back(), a.slot, static_cast<int32_t>(pos), true);
      held.push_back(a.draft.back());
      rows.push_back(i);
    }
    if (draft_batch_.size() == 0) break;
    d.forward(draft_batch_, draft_logits_);
    for (size_t r = 0; r < rows.size(); ++r) {
      draw_draft(*active[rows[r]], {draft_logits_.data() + r * n_vocab, n_vocab});
    }
  }
}

void Scheduler::draw_draft(Active& a, std::span<const float> logits) {
  if (!a.draft_sampler) {
    a.draft.push_back(greedy(logits));
    return;
  }
  // Sampled: a draw from the draft's own distribution, which the check needs (q).
  const size_t i = a.draft.size();
  if (a.draft_probs.size() <= i) a.draft_probs.resize(i + 1);
  a.draft_sampler->distribution(logits, a.draft_probs[i]);
  a.draft.push_back(a.draft_sampler->draw(a.draft_probs[i]));
}

void Scheduler::check_and_emit(Active& a, const float* rows) {
  const auto n_vocab = static_cast<size_t>(runner_.hparams().n_vocab);
  const size_t k = a.draft.size();
  // The draft model's distributions where it sampled; none for lookup and greedy drafts
  // (all on the draft token).
  const bool sampled = a.draft_sampler && a.drafted_by_model;
  const DraftVerdict v =
      check_draft(a.sampler, a.draft, {rows, (k + 1) * n_vocab}, static_cast<int64_t>(n_vocab),
                  sampled ? std::span<const TokenProbs>(a.draft_probs.data(), k)
                          : std::span<const TokenProbs>(),
                  draft_scratch_);
  a.n_drafted += static_cast<int64_t>(k);
  a.n_draft_accepted += v.accepted;
  ++a.n_target_steps;
  auto& cached = slots_[static_cast<size_t>(a.slot)].cached;
  // A recurrent state absorbed the whole draft: where part of it was refused, it goes back to
  // before this step (the kept tokens run again next step), before anything can finish the
  // request. A KV cache holds the kept positions (the refused ones are overwritten later).
  if (runner_.recurrent() && v.accepted < static_cast<int>(k)) {
    runner_.return_to_held_state(a.slot);
  } else {
    a.state_len = cached.size() + static_cast<size_t>(v.accepted);
  }
  // The kept draft tokens are in the cache already (the rest of the draft's rows there are
  // overwritten by what comes next); then the target's own next token.
  for (int i = 0; i < v.accepted; ++i) {
    cached.push_back(a.draft[static_cast<size_t>(i)]);
    if (!emit(a, a.draft[static_cast<size_t>(i)], {rows + size_t(i) * n_vocab, n_vocab}, false)) {
      return;
    }
  }
  if (emit(a, v.next, {rows + size_t(v.accepted) * n_vocab, n_vocab}, false)) {
    a.next_token = v.next;
  }
}

void Scheduler::score_and_emit(Active& a, size_t position, const float* logits) {
  const auto n_vocab = static_cast<size_t>(runner_.hparams().n_vocab);
  const int32_t token = a.params.prompt[position + 1];
  if (a.n_generated == 0) a.first_token = Clock::now();
  a.stream->publish_score({token, a.sampler.check({logits, n_vocab}, token)});
  a.sampler.accept(token);
  ++a.n_generated;
}

bool Scheduler::step() {
  drop_cancelled();
  admit();
  batch_.clear();
  // Which running request each logits row belongs to, in batch order, and the position
  // the row is of (a check's rows score the token after it). Members, so that a step
  // allocates nothing once warm.
  std::vector<Active*>& rows = rows_;
  std::vector<size_t>& row_positions = row_positions_;
  rows.clear();
  row_positions.clear();
  // Decode tokens first: every generating request advances by one token per step, with its
  // draft after it (prompt lookup, or the draft model's, run for all of them together).
  std::vector<Active*>& decoding = decoding_;
  std::vector<Active*>& by_draft_model = by_draft_model_;
  std::vector<int64_t>& draft_k = draft_k_;
  decoding.clear();
  by_draft_model.clear();
  draft_k.clear();
  for (auto& a : running_) {
    if (a->next_token < 0) continue;
    decoding.push_back(a.get());
    a->draft.clear();
    if (!speculates(*a)) continue;
    // Within the context and what the request may still generate.
    const Slot& slot = slots_[static_cast<size_t>(a->slot)];
    // A slot the runner is behind (a recurrent state that went back, states lost) runs the
    // kept tokens again first, without a draft (another refusal would send a recurrent state
    // back behind them again).
    if (a->state_len < slot.cached.size()) continue;
    const SpeculativeParams& spec = *a->params.speculative;
    const bool by_mtp = drafts_by_mtp(*a);  // precedence: speculative.h
    const bool by_model = !by_mtp && spec.draft > 0 && options_.draft != nullptr;
    a->drafted_by_model = by_model;
    int64_t k = std::min<int64_t>(by_mtp     ? spec.mtp
                                  : by_model ? spec.draft
                                             : spec.lookup,
                                  runner_.n_ctx() - 1 - static_cast<int64_t>(slot.cached.size()));
    if (a->params.max_tokens >= 0) k = std::min(k, a->params.max_tokens - a->n_generated);
    if (k <= 0) continue;
    if (by_mtp) {  // the head's draft from the last forward (feed_mtp)
      k = std::min(k, static_cast<int64_t>(a->mtp_draft.size()));
      a->draft.assign(a->mtp_draft.begin(), a->mtp_draft.begin() + k);
      continue;
    }
    a->context.assign(slot.cached.begin(), slot.cached.end());
    a->context.push_back(a->next_token);
    if (by_model) {
      by_draft_model.push_back(a.get());
      draft_k.push_back(k);
    } else {
      lookup_draft(a->context, spec.ngram_min, spec.ngram_max, static_cast<int>(k), a->draft);
    }
  }
  if (!by_draft_model.empty()) {
    try {
      run_draft_model(by_draft_model, draft_k);
    } catch (const std::exception& e) {
      // No draft this step (the target decodes as without one); the draft's slots are
      // unknown now: they start again.
      for (Active* a : by_draft_model) a->draft.clear();
      for (auto& held : draft_cached_) held.clear();
      std::lock_guard lock(mutex_);
      failure_ = std::string("the draft model: ") + e.what();
    }
  }
  // The tokens of a slot the runner is behind run first: a recurrent state's kept tokens it
  // went back before, or every token after the runner lost its states (then within the
  // budget: the pending token waits until they have all run).
  std::vector<std::pair<Active*, size_t>>& behind = behind_;  // request, run up to
  behind.clear();
  for (Active* a : decoding) {
    const Slot& slot = slots_[static_cast<size_t>(a->slot)];
    const std::vector<int32_t>& cached = slot.cached;
    const size_t pos = cached.size();
    a->mtp_row = -1;
    if (a->state_len < pos) {
      // The head saw a refused draft's kept tokens when they were checked, not lost ones.
      if (slot.mtp_rows <= a->state_len) {
        a->mtp_row = batch_.size();
        a->mtp_pos = a->state_len;
      }
      const auto room =
          static_cast<size_t>(std::max<int64_t>(options_.batch_tokens - batch_.size(), 1));
      const size_t end = std::min(pos, a->state_len + room);
      for (size_t p = a->state_len; p < end; ++p) {
        batch_.add(cached[p], a->slot, static_cast<int32_t>(p), false);
      }
      if (end < pos) {
        a->mtp_end = end;
        behind.push_back({a, end});
        continue;
      }
    }
    if (runner_.recurrent() && !a->draft.empty()) runner_.hold_state(a->slot);
    if (a->mtp_row < 0) {
      a->mtp_row = batch_.size();
      a->mtp_pos = pos;
    }
    a->mtp_end = pos + 1 + a->draft.size();
    for (size_t i = 0; i <= a->draft.size(); ++i) {
      batch_.add(i == 0 ? a->next_token : a->draft[i - 1], a->slot, static_cast<int32_t>(pos + i),
                 true);
      rows.push_back(a);
      row_positions.push_back(pos + i);
    }
  }
  // Then prompt chunks, oldest request first, within what the budget leaves (at least one
  // token, so that prefill always progresses).
  int64_t budget = std::max<int64_t>(options_.batch_tokens - batch_.size(), 1);
  std::vector<std::pair<Active*, size_t>>& prefills = prefills_;  // request, tokens this step
  prefills.clear();
  for (auto& a : running_) {
    if (budget <= 0) break;
    if (a->next_token >= 0 || a->n_prefilled >= a->params.prompt.size()) continue;
    size_t n = std::min(a->params.prompt.size() - a->n_prefilled, static_cast<size_t>(budget));
    // A recurrent model's chunk ends at the next checkpoint, where its state is kept.
    if (runner_.recurrent()) n = std::min(n, next_checkpoint(*a) - a->n_prefilled);
    a->mtp_row = batch_.size();
    a->mtp_pos = a->n_prefilled;
    a->mtp_end = a->n_prefilled + n;
    for (size_t i = 0; i < n; ++i) {
      const size_t pos = a->n_prefilled + i;
      const bool last = pos + 1 == a->params.prompt.size();
      // (The last position is never among those published: its row ends the prefill.)
      const bool scored =
          pos >= a->published_until &&
          (a->params.prompt_logits ||
           (a->params.score_from > 0 ? pos + 1 >= static_cast<size_t>(a->params.score_from) && !last
                                     : last));
      batch_.add(a->params.prompt[pos], a->slot, static_cast<int32_t>(pos), scored);
      if (scored) {
        rows.push_back(a.get());
        row_positions.push_back(pos);
      }
    }
    prefills.push_back({a.get(), n});
    budget -= static_cast<int64_t>(n);
  }
  if (batch_.size() == 0) return false;

  const auto forward_start = Clock::now();
  for (auto& [a, n] : prefills) {
    if (a->prefill_start == Clock::time_point()) a->prefill_start = forward_start;
  }
  try {
    runner_.forward(batch_, logits_);
  } catch (const StatesLost& e) {
    states_lost(e.what());
    return true;
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(mutex_);
      failure_ = e.what();
    }
    // The pass failed as a whole: every request in it fails, the rest go on.
    for (Active* a : rows) finish(*a, FinishReason::kError, e.what());
    for (auto& [a, n] : prefills) finish(*a, FinishReason::kError, e.what());
    for (auto& [a, end] : behind) finish(*a, FinishReason::kError, e.what());
    std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
    n_running_.store(static_cast<int64_t>(running_.size()));
    return true;
  }

  {
    const double took = seconds_between(forward_start, Clock::now());
    std::lock_guard lock(mutex_);
    failure_.clear();
    ++forward_stats_.batches;
    forward_stats_.tokens += batch_.size();
    forward_stats_.seconds += took;
  }
  // The pass succeeded: the slots now hold what it wrote.
  for (auto& [a, end] : behind) a->state_len = end;
  for (Active* a : decoding) {
    const auto ran_behind = [&](const std::pair<Active*, size_t>& b) { return b.first == a; };
    if (std::any_of(behind.begin(), behind.end(), ran_behind)) continue;  // token not run yet
    auto& cached = slots_[static_cast<size_t>(a->slot)].cached;
    cached.push_back(a->next_token);
    if (a->draft.empty()) a->state_len = cached.size();  // else check_and_emit says
    a->next_token = -1;
  }
  int64_t n_prefilled = 0, n_cached = 0;
  for (auto& [a, n] : prefills) {
    auto& cached = slots_[static_cast<size_t>(a->slot)].cached;
    const auto begin = a->params.prompt.begin() + static_cast<std::ptrdiff_t>(a->n_prefilled);
    cached.insert(cached.end(), begin, begin + static_cast<std::ptrdiff_t>(n));
    if (a->n_prefilled == static_cast<size_t>(a->n_cached)) n_cached += a->n_cached;
    a->n_prefilled += n;
    a->state_len = cached.size();
    n_prefilled += static_cast<int64_t>(n);
    if (a->n_prefilled == a->params.prompt.size()) a->prefill_end = Clock::now();
    if (runner_.recurrent() && a->n_prefilled == checkpoint_before(*a, a->n_prefilled + 1)) {
      runner_.save_state(a->slot, static_cast<int64_t>(a->n_prefilled));
    }
  }
  if (observer_ && (n_prefilled > 0 || n_cached > 0))
    observer_->add_prompt_tokens(n_prefilled, n_cached);

  const auto n_vocab = static_cast<size_t>(runner_.hparams().n_vocab);
  for (size_t r = 0; r < rows.size();) {
    const float* row = logits_.data() + r * n_vocab;
    Active& a = *rows[r];
    if (a.params.score_from > 0) {
      score_and_emit(a, row_positions[r], row);
      ++r;
      continue;
    }
    const bool prompt_row = row_positions[r] < a.params.prompt.size();
    if (a.params.prompt_logits && prompt_row) a.stream->publish_logits({row, n_vocab});
    if (prompt_row && row_positions[r] + 1 < a.params.prompt.size()) {
      ++r;  // a prompt_logits row before the last
    } else if (a.params.max_tokens == 0) {
      finish(a, FinishReason::kLength);  // the prompt only
      ++r;
    } else if (!a.draft.empty()) {
      const size_t k = a.draft.size();
      check_and_emit(a, row);  // its decode row and its draft's, consecutive
      a.draft.clear();
      r += k + 1;
    } else {
      sample_and_emit(a, row);
      ++r;
    }
  }
  for (auto& [a, n] : prefills) {
    if (a->params.score_from > 0 && a->n_prefilled == a->params.prompt.size() && !a->done) {
      finish(*a, FinishReason::kStop);  // a check ends with its prefill
    }
  }
  feed_mtp();
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
  n_running_.store(static_cast<int64_t>(running_.size()));
  if (observer_) observer_->set_queue(n_queued(), n_running_.load());
  return true;
}

}  // namespace herd::engine
