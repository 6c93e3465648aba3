// Recurrent states on a pod (cluster_runner.h): snapshots for prefix reuse and a held copy
// for a draft's check, kept by every rank of the pod for its own layers. This process's
// ranks keep theirs in RankRunner::states; each node's loaded part keeps its own and does the
// operations a STATE frame lists, answering with their outcomes.
//
// Order with batches: operations wait in the pod until the next forward() (or a restore,
// which needs its answer) and are sent then, before the batch, and every answer is awaited
// before the batch goes out. So a hold applies to the states before the batch that checks
// the draft, and a return to the held copy comes before the next batch, on every stage,
// whichever way the batch reaches a stage (from this process or straight from the previous
// stage). The cost: one round trip to the nodes (in parallel) per forward() that follows
// state operations, whatever their number.
#include <algorithm>
#include <mutex>
#include <string>

#include "cluster/cluster_runner.h"
#include "cluster/cluster_runner_state.h"
#include "cluster/state_ops.h"
#include "util/error.h"

namespace herd::cluster {

namespace {

// How long a node may take to answer a STATE (copies of a slot's states: milliseconds). A
// dead node is caught sooner by the heartbeat.
constexpr net::Millis kStateTimeout{60000};

}  // namespace

std::vector<ClusterRunner::Impl::StateOutcome> ClusterRunner::Impl::run_states(
    const std::vector<net::StateOp>& ops) {
  std::vector<net::StateOp> all = std::move(pending_states);
  pending_states.clear();
  all.insert(all.end(), ops.begin(), ops.end());
  std::vector<StateOutcome> outcome(ops.size());
  if (all.empty()) return outcome;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error.empty()) throw Error("cluster", "the cluster failed earlier: " + error);
  }
  const size_t first = all.size() - ops.size();  // where `ops` begin in `all`
  std::vector<bool> counted(ops.size(), false);
  const auto count = [&](size_t i, int64_t pos) {
    if (i < first) return;
    StateOutcome& o = outcome[i - first];
    o.low = counted[i - first] ? std::min(o.low, pos) : pos;
    o.high = counted[i - first] ? std::max(o.high, pos) : pos;
    counted[i - first] = true;
  };
  // Sent in pieces of at most kMaxStateOps (far more than a step makes).
  for (size_t begin = 0; begin < all.size(); begin += net::kMaxStateOps) {
    const size_t end = std::min(all.size(), begin + size_t{net::kMaxStateOps});
    net::State request;
    request.ops.assign(all.begin() + static_cast<std::ptrdiff_t>(begin),
                       all.begin() + static_cast<std::ptrdiff_t>(end));
    const uint64_t id = ++state_id;
    std::vector<RankRunner*> asked;
    try {
      for (const auto& s : stages) {
        for (RankRunner& rank : s->ranks) {
          if (!rank.remote) continue;
          net::send_message(*rank.remote, id, request);
          asked.push_back(&rank);
        }
      }
    } catch (const std::exception& e) {
      fail(e.what());  // answers may be left unread: the pod cannot run another batch
      throw;
    }
    // This process's ranks meanwhile. Every node's answer is read before anything is thrown,
    // so that none is taken for the next batch's result.
    std::string refused;
    for (const auto& s : stages) {
      for (RankRunner& rank : s->ranks) {
        if (rank.remote) continue;
        try {
          for (size_t i = begin; i < end; ++i)
            count(i, run_state_op(rank.states, *rank.part, all[i]));
        } catch (const std::exception& e) {
          if (refused.empty()) refused = std::string("[cluster] this process: ") + e.what();
        }
      }
    }
    for (RankRunner* rank : asked) {
      net::Frame frame;
      try {
        frame = rank->remote->recv_frame(kStateTimeout);
      } catch (const std::exception& e) {
        fail(e.what());
        throw;
      }
      try {
        if (frame.header.type == net::MessageType::ERROR) {
          throw Error("cluster", "node '" + rank->node_name + "': " +
                                     net::printable(net::decode_error(frame.payload()).message));
        }
        const net::State answer = net::expect_message<net::State>(frame, rank->remote->peer_name());
        bool matches = frame.header.id == id && answer.ops.size() == request.ops.size();
        for (size_t i = 0; matches && i < answer.ops.size(); ++i) {
          matches =
              answer.ops[i].kind == request.ops[i].kind && answer.ops[i].seq == request.ops[i].seq;
        }
        if (!matches) {
          throw Error("cluster",
                      "node '" + rank->node_name + "' answered STATE " +
                          std::to_string(frame.header.id) + " with " +
                          std::to_string(answer.ops.size()) + " operations that are not the " +
                          std::to_string(request.ops.size()) + " of STATE " + std::to_string(id));
        }
        for (size_t i = begin; i < end; ++i) count(i, answer.ops[i - begin].pos);
      } catch (const std::exception& e) {
        if (refused.empty()) refused = e.what();
      }
    }
    if (!refused.empty()) throw Error(refused);
  }
  return outcome;
}

bool ClusterRunner::Impl::holds_states() const {
  for (const auto& s : stages) {
    for (const RankRunner& rank : s->ranks) {
      const bool can = rank.part ? engine::RecurrentStates::can_hold(*rank.part)
                                 : rank.assignment.placement != "first-layers";
      if (!can) return false;
    }
  }
  return true;
}

namespace {

void check_slot(int32_t seq, int64_t n_seq) {
  if (seq < 0 || seq >= n_seq) {
    throw Error("cluster", "recurrent state of slot " + std::to_string(seq) + ": the pod has " +
                               std::to_string(n_seq) + " slots");
  }
}

}  // namespace

void ClusterRunner::save_state(int32_t seq, int64_t pos) {
  check_slot(seq, n_seq_);
  if (pos <= 0 || pos > net::kMaxStatePosition) return;
  std::lock_guard<std::mutex> turn(forward_mutex_);
  // No pod now: none to keep it (the pod formed next has no snapshots).
  if (std::shared_ptr<Impl> p = pod())
    p->pending_states.push_back({net::StateOpKind::SAVE, seq, pos});
}

int64_t ClusterRunner::restore_state(int32_t seq, int64_t at_most) {
  check_slot(seq, n_seq_);
  at_most = std::clamp<int64_t>(at_most, 0, net::kMaxStatePosition);
  std::lock_guard<std::mutex> turn(forward_mutex_);
  std::shared_ptr<Impl> p = pod();
  if (!p) return 0;
  if (at_most == 0) {
    // The slot starts again: its snapshots (of another sequence) are forgotten with the next
    // batch, and nothing need be waited for.
    p->pending_states.push_back({net::StateOpKind::RESTORE, seq, 0});
    return 0;
  }
  // The ranks agree when each kept the same snapshots (they are saved together); a rank
  // without recurrent layers answers at_most. Where they do not, all go back to the lowest,
  // which ends at 0 at the latest.
  for (;;) {
    const Impl::StateOutcome o = p->run_states({{net::StateOpKind::RESTORE, seq, at_most}})[0];
    // 0: the slot starts again at position 0, where no rank's states matter.
    if (o.low == o.high || o.low == 0) return o.low;
    at_most = o.low;
  }
}

bool ClusterRunner::holds_states() const {
  const std::shared_ptr<Impl> p = pod();
  return p != nullptr && p->holds_states();
}

void ClusterRunner::hold_state(int32_t seq) {
  check_slot(seq, n_seq_);
  std::lock_guard<std::mutex> turn(forward_mutex_);
  std::shared_ptr<Impl> p = pod();
  if (!p) throw Error("cluster", "no pod is formed now: no recurrent state can be held");
  p->pending_states.push_back({net::StateOpKind::HOLD, seq, 0});
}

void ClusterRunner::return_to_held_state(int32_t seq) {
  check_slot(seq, n_seq_);
  std::lock_guard<std::mutex> turn(forward_mutex_);
  std::shared_ptr<Impl> p = pod();
  if (!p) throw Error("cluster", "no pod is formed now: no recurrent state is held");
  p->pending_states.push_back({net::StateOpKind::RETURN, seq, 0});
}

}  // namespace herd::cluster
