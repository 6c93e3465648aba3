// Scheduler::Active: one running request, as the scheduler's parts (scheduler.cpp, the MTP
// drafting in scheduler_mtp.cpp) see it. Internal to the scheduler.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

namespace herd::engine {

struct Scheduler::Active {
  Active(GenerationParams p, std::shared_ptr<RequestStream> s, const tokenizer::Tokenizer& tok)
      : params(std::move(p)),
        stream(std::move(s)),
        sampler(params.sampler),
        decoder(tok, params.render_special),
        stops(params.stop) {}

  GenerationParams params;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;
  tokenizer::StreamDecoder decoder;
  StopMatcher stops;
  std::unique_ptr<TokenFilter> filter;  // params.constraint's, when set
  int32_t slot = -1;
  size_t n_prefilled = 0;   // prompt tokens in the slot's KV cache
  int64_t n_cached = 0;     // of which were reused
  int32_t next_token = -1;  // sampled, not yet run through the model
  int64_t n_generated = 0;
  std::vector<int32_t> draft;     // run through the model this step after next_token
  std::vector<int32_t> context;   // scratch: the slot's tokens and next_token, for lookup
  bool drafted_by_model = false;  // this step's draft came from the draft model
  // The positions of the slot the runner holds. Behind the slot's tokens on a model with
  // recurrent state after a check refused part of a draft (the state went back to before it),
  // and at 0 after the runner lost every slot's states (StatesLost): the next steps run the
  // kept tokens again first, within the batch's budget, before the pending token.
  size_t state_len = 0;
  // Prompt positions whose rows (logits, scores) were published before the runner lost the
  // slot's states: run again, not published again.
  size_t published_until = 0;
  int64_t n_replayed = 0;  // tokens run again after the runner lost its states
  int n_states_lost = 0;   // times the runner lost its states while the request ran
  // A sampled request's draft-model drafts are drawn from the draft's distribution (its
  // chain without the penalties), kept per draft token for the check.
  std::optional<Sampler> draft_sampler;
  std::vector<TokenProbs> draft_probs;
  // The MTP head (SpeculativeParams::mtp): this step's first batch row of the positions the
  // head has not seen, the position of that row (-1: none this step) and the end of its rows,
  // and the head's draft for the next step.
  int64_t mtp_row = -1;
  size_t mtp_pos = 0;
  size_t mtp_end = 0;  // the position after this step's last row of the request
  std::vector<int32_t> mtp_draft;
  int64_t n_drafted = 0, n_draft_accepted = 0, n_target_steps = 0;
  std::chrono::steady_clock::time_point submitted, first_token, prefill_start, prefill_end;
  bool done = false;
};

}  // namespace herd::engine
