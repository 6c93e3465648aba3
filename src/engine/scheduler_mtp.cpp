// The scheduler's MTP drafting (SpeculativeParams::mtp): the model's own NextN head drafts the
// next step's tokens from the hidden states of the forward that just ran.
//
// The head has a KV cache of its own, and every position the target keeps must pass through
// it once (mtp_head.h): after each forward, the positions each MTP request kept (its prompt
// chunk, its decode row and the draft rows the check accepted) go through the head, each with
// the token of the position after it, and the head's chained guesses after the last are the
// request's draft for the next step. Requests that do not draft with the head are not fed (they
// pay nothing); Slot::mtp_rows says how far the head's rows of a slot hold its tokens, so a
// later MTP request on that slot reuses only that much of the prefix cache.
#include <algorithm>
#include <exception>
#include <string>

#include "engine/scheduler.h"
#include "engine/scheduler_active.h"

namespace herd::engine {

bool Scheduler::drafts_by_mtp(const Active& a) const {
  return a.params.speculative && a.params.speculative->mtp > 0 && runner_.mtp_layers() > 0 &&
         speculates(a);
}

size_t Scheduler::mtp_keep(const Slot& slot, size_t best_prefix, size_t keep) {
  // The head's row at position `keep` (the hidden state before it and its token) is not run
  // again: it must be there, for the same token (inside the shared prefix).
  const size_t seen = std::min(best_prefix, slot.mtp_rows);
  return seen == 0 ? 0 : std::min(keep, seen - 1);
}

void Scheduler::feed_mtp() {
  if (runner_.mtp_layers() == 0) return;
  mtp_starts_.clear();
  int k = 0;
  for (auto& a : running_) {
    const int64_t first_row = a->mtp_row;
    a->mtp_row = -1;
    a->mtp_draft.clear();
    if (first_row < 0 || a->done || !drafts_by_mtp(*a)) continue;
    const std::vector<int32_t>& cached = slots_[static_cast<size_t>(a->slot)].cached;
    const std::vector<int32_t>& prompt = a->params.prompt;
    // The token at position q: the slot's, else the prompt's next chunk's first, else the
    // one chosen for the next step.
    auto token_at = [&](size_t q) {
      return q < cached.size() ? cached[q] : q < prompt.size() ? prompt[q] : a->next_token;
    };
    // Up to the end of this step's rows: short of the slot's tokens while a slot that lost
    // its states runs them again.
    const size_t end = std::min(cached.size(), a->mtp_end);
    if (token_at(end) < 0) continue;
    if (a->mtp_pos == 0) mtp_starts_.push_back({a->slot, -1, -1, token_at(0)});
    for (size_t q = a->mtp_pos; q < end; ++q) {
      mtp_starts_.push_back({a->slot, static_cast<int32_t>(q),
                             first_row + static_cast<int64_t>(q - a->mtp_pos), token_at(q + 1)});
    }
    // A prompt chunk before the last (or tokens run again) needs its rows fed, not a draft: no
    // chained steps.
    if (a->next_token >= 0 && end == cached.size()) k = std::max(k, a->params.speculative->mtp);
  }
  if (mtp_starts_.empty()) return;
  k = std::max(k, 1);  // the head runs the fed rows, and the first guess comes with them
  try {
    runner_.mtp_draft(mtp_starts_, k, mtp_drafts_);
  } catch (const std::exception& e) {
    // No drafts next step (the target decodes as without them); what the head holds of these
    // slots is unknown now.
    for (const MtpStart& s : mtp_starts_) slots_[static_cast<size_t>(s.seq)].mtp_rows = 0;
    std::lock_guard lock(mutex_);
    failure_ = std::string("the MTP head: ") + e.what();
    return;
  }
  for (const MtpDraft& d : mtp_drafts_) {
    Slot& slot = slots_[static_cast<size_t>(d.seq)];
    if (slot.active != nullptr && slot.active->mtp_end < slot.cached.size()) {
      slot.mtp_rows = slot.active->mtp_end;  // still behind: no draft
      continue;
    }
    slot.mtp_rows = slot.cached.size() + 1;  // and the row of the token chosen next
    if (slot.active != nullptr) slot.active->mtp_draft.assign(d.tokens.begin(), d.tokens.end());
  }
}

}  // namespace herd::engine
