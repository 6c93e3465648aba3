// The scheduler's answer to a runner that lost its slots' states (StatesLost: a pod formed
// again after a lost node, or with a node taken in): every running request runs its tokens
// again from position 0 through the step's usual paths, so that its output is the one it
// would have been.
#include <algorithm>
#include <string>

#include "engine/scheduler.h"
#include "engine/scheduler_active.h"

namespace herd::engine {

void Scheduler::states_lost(const std::string& why) {
  // The batch did not run, and the runner holds nothing: idle slots' prefixes are gone, and
  // every request runs what it holds again from position 0, through the steps' usual paths (a
  // prompt is prefilled again; a reply's tokens run as the tokens a slot is behind by, before
  // its pending token). Nothing is published twice: a prompt's rows that were are not again,
  // and a pending token was chosen already. Drafts, held states, snapshots and the MTP head's
  // rows are gone with the rest.
  for (Slot& slot : slots_) {
    slot.cached.resize(slot.active && slot.active->next_token >= 0 ? slot.cached.size() : 0);
    slot.mtp_rows = 0;
  }
  for (auto& a : running_) {
    a->draft.clear();
    a->mtp_draft.clear();
    a->mtp_row = -1;
    a->n_replayed += static_cast<int64_t>(a->state_len);
    if (a->next_token < 0) {
      a->published_until = std::max(a->published_until, a->n_prefilled);
      a->n_prefilled = 0;
      a->n_cached = 0;
    }
    a->state_len = 0;
    // A runner that loses its states on every pass would never finish the request.
    if (++a->n_states_lost > kMaxStatesLost) {
      finish(*a, FinishReason::kError,
             why + " (" + std::to_string(a->n_states_lost) + " times during this request)");
    }
  }
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->done; });
  n_running_.store(static_cast<int64_t>(running_.size()));
}

}  // namespace herd::engine
