#include "engine/recurrent_states.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace herd::engine {

bool RecurrentStates::can_hold(const Rank& rank) {
  return rank.cpu_stage() == nullptr || !rank.cpu_stage()->has_recurrent_state();
}

void RecurrentStates::check_slot(const Rank& rank, int32_t seq) {
  if (seq < 0 || seq >= rank.shard().n_seq()) {
    throw Error("engine", "recurrent state of slot " + std::to_string(seq) + ": the part has " +
                              std::to_string(rank.shard().n_seq()) + " slots");
  }
}

void RecurrentStates::save(Rank& rank, int32_t seq, int64_t pos) {
  check_slot(rank, seq);
  if (!rank.shard().has_recurrent_state() || !can_hold(rank) || pos <= 0) return;
  snapshots_.resize(static_cast<size_t>(rank.shard().n_seq()));
  auto& mine = snapshots_[static_cast<size_t>(seq)];
  std::erase_if(mine, [&](const RecurrentSnapshot& s) { return s.pos == pos; });
  if (mine.size() == kSnapshotsPerSlot) mine.erase(mine.begin());
  RecurrentSnapshot snapshot = rank.shard().snapshot_state(seq);
  if (snapshot.pos != pos) {
    throw Error("engine", "a snapshot of slot " + std::to_string(seq) + " at position " +
                              std::to_string(pos) + " was asked for; its states stand at " +
                              std::to_string(snapshot.pos));
  }
  mine.push_back(std::move(snapshot));
}

int64_t RecurrentStates::restore(Rank& rank, int32_t seq, int64_t at_most) {
  check_slot(rank, seq);
  if (!rank.shard().has_recurrent_state() && can_hold(rank)) return std::max<int64_t>(at_most, 0);
  if (static_cast<size_t>(seq) >= snapshots_.size()) return 0;
  auto& mine = snapshots_[static_cast<size_t>(seq)];
  std::erase_if(mine, [&](const RecurrentSnapshot& s) { return s.pos > at_most; });
  const auto best = std::max_element(
      mine.begin(), mine.end(),
      [](const RecurrentSnapshot& a, const RecurrentSnapshot& b) { return a.pos < b.pos; });
  if (best == mine.end()) return 0;
  rank.shard().restore_state(seq, *best);
  return best->pos;
}

void RecurrentStates::hold(Rank& rank, int32_t seq) {
  check_slot(rank, seq);
  if (!can_hold(rank)) {
    throw Error("engine",
                "a part split over a GPU and the CPU cannot hold its recurrent states "
                "(--device-layers)");
  }
  if (!rank.shard().has_recurrent_state()) return;
  const auto n = static_cast<size_t>(rank.shard().n_seq());
  held_.resize(n);
  holding_.resize(n, false);
  held_[static_cast<size_t>(seq)] = rank.shard().snapshot_state(seq);
  holding_[static_cast<size_t>(seq)] = true;
}

void RecurrentStates::return_to_held(Rank& rank, int32_t seq) {
  check_slot(rank, seq);
  if (!rank.shard().has_recurrent_state() && can_hold(rank)) return;
  if (static_cast<size_t>(seq) >= holding_.size() || !holding_[static_cast<size_t>(seq)]) {
    throw Error("engine", "no recurrent state is held for slot " + std::to_string(seq));
  }
  rank.shard().restore_state(seq, held_[static_cast<size_t>(seq)]);
}

}  // namespace herd::engine
