// RecurrentStates: the snapshots and the held copy of a rank's recurrent states (linear
// attention, DeepSeek V4's compressed cache: runner.h's save_state / restore_state /
// hold_state / return_to_held_state), for one rank of a pod: a node's loaded part, or a rank
// the coordinator runs itself. Each rank of a pod keeps its own layers' states (a tensor-
// parallel rank its slice of them); the pod's runner asks every rank to do the same thing.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/rank.h"

namespace herd::engine {

class RecurrentStates {
 public:
  // Snapshots kept per slot (the oldest go first), as LocalRunner keeps.
  static constexpr size_t kSnapshotsPerSlot = 4;

  // Whether the rank's states can all be copied: a part split over a GPU and the CPU keeps
  // the later layers' states in its CPU stage, which snapshots do not cover.
  static bool can_hold(const Rank& rank);

  // Keeps a snapshot of slot `seq` at `pos` positions (none for a rank without recurrent
  // state, or one that cannot hold its states, or pos <= 0).
  void save(Rank& rank, int32_t seq, int64_t pos);
  // Restores the latest snapshot of `seq` at a position <= at_most, forgets those beyond it,
  // and returns its position (0: none). A rank without recurrent state cuts its cache back
  // to any prefix: it answers at_most.
  int64_t restore(Rank& rank, int32_t seq, int64_t at_most);
  // Keeps a copy of `seq`'s states as they stand / puts it back (one per slot).
  void hold(Rank& rank, int32_t seq);
  void return_to_held(Rank& rank, int32_t seq);

 private:
  // Throws herd::Error naming the slot when it is not one of the rank's.
  static void check_slot(const Rank& rank, int32_t seq);

  std::vector<std::vector<RecurrentSnapshot>> snapshots_;  // per slot, in the order taken
  std::vector<RecurrentSnapshot> held_;                    // per slot
  std::vector<bool> holding_;                              // per slot: held_ is set
};

}  // namespace herd::engine
