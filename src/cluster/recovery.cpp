// A lost node: the runner's forward() notices it (the heartbeat's verdict), forms a pod
// again of the nodes that still answer (spares in the lost nodes' places when they can
// take them) and throws engine::StatesLost: the new pod's slots are empty, and the
// scheduler runs every sequence's tokens again. The mender retries while the pod is
// degraded and finds nodes that answer again, taken in at a request boundary (a new pod
// too: StatesLost again).
#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/cluster_runner_state.h"
#include "cluster/peers.h"
#include "util/error.h"

namespace herd::cluster {

namespace {

constexpr net::Millis kRetryEvery{1000};  // forming a pod while degraded; probing lost nodes
// Pods formed again after failed batches, with no batch run since, before giving up.
constexpr int kMaxRecoveries = 4;
// What an event of a new pod says of the sequences' tokens.
constexpr const char* kReplayedBy = "its slots are empty: the scheduler runs every sequence again";

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

// Spares in the places of lost nodes: when every lost node that ran a rank has a spare
// standing by for that rank, the pod is formed again with the same plan (every survivor
// and spare loads what it already has: no weights shipped). Gives the peers to ask (the
// plan's nodes in order with spares in place, then the spares still standing by) and the
// plan renumbered for them; nullopt when a lost rank has no live spare.
std::optional<KeptPlan> spares_in_place(const Plan& plan, const std::vector<NodeProfile>& nodes,
                                        const std::vector<Shadow>& spares,
                                        const std::vector<std::string>& lost,
                                        std::vector<std::string>& peers, std::string& text) {
  const auto is_lost = [&](int node) {
    return std::find(lost.begin(), lost.end(), nodes[static_cast<size_t>(node)].address) !=
           lost.end();
  };
  std::vector<bool> taken(spares.size(), false);
  std::vector<int> renumbered(nodes.size(), -1);
  renumbered[0] = 0;
  KeptPlan kept{plan, {}};
  peers.clear();
  text.clear();
  for (size_t i = 0; i < kept.plan.stages.size(); ++i) {
    for (size_t k = 0; k < kept.plan.stages[i].ranks.size(); ++k) {
      int& node = kept.plan.stages[i].ranks[k].node;
      if (node == 0) continue;
      int now = node;
      if (is_lost(node)) {
        now = -1;
        for (size_t j = 0; j < spares.size() && now < 0; ++j) {
          const Shadow& sp = spares[j];
          if (!taken[j] && sp.stage == static_cast<int>(i) && sp.rank == static_cast<int>(k) &&
              !is_lost(sp.node)) {
            taken[j] = true;
            now = sp.node;
            text += (text.empty() ? "spare '" : ", spare '") +
                    nodes[static_cast<size_t>(now)].name + "' in the place of '" +
                    nodes[static_cast<size_t>(node)].name + "'";
          }
        }
        if (now < 0) return std::nullopt;
      }
      if (renumbered[static_cast<size_t>(now)] < 0) {
        peers.push_back(nodes[static_cast<size_t>(now)].address);
        renumbered[static_cast<size_t>(now)] = static_cast<int>(peers.size());
      }
      node = renumbered[static_cast<size_t>(now)];
    }
  }
  if (text.empty()) return std::nullopt;  // no rank was lost: nothing to put in place
  for (size_t j = 0; j < spares.size(); ++j) {
    if (taken[j] || is_lost(spares[j].node)) continue;
    peers.push_back(nodes[static_cast<size_t>(spares[j].node)].address);
    kept.spares.push_back({static_cast<int>(peers.size()), spares[j].stage, spares[j].rank});
  }
  return kept;
}

// Whether the batch begins a request (a prompt, or a sequence started again or rewound)
// rather than only continuing sequences by a token each: the boundary where nodes may
// join the pod. seq_len: the positions each sequence holds.
bool begins_request(const engine::Batch& batch, const std::vector<size_t>& seq_len) {
  std::vector<int32_t> seen;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int32_t seq = batch.seq[static_cast<size_t>(i)];
    const auto pos = static_cast<size_t>(batch.pos[static_cast<size_t>(i)]);
    const auto s = static_cast<size_t>(seq);
    if (pos == 0 || s >= seq_len.size() || pos < seq_len[s]) return true;
    if (std::find(seen.begin(), seen.end(), seq) != seen.end()) return true;  // a chunk
    seen.push_back(seq);
  }
  return false;
}

}  // namespace

void ClusterRunner::mend() {
  std::unique_lock<std::mutex> lock(mender_mutex_);
  while (!mender_wake_.wait_for(lock, kRetryEvery, [&] { return stopping_; })) {
    lock.unlock();
    if (state_->options.discover) {
      // Browsing takes a while (--discover-ms): done here, never on a recovery's path.
      std::vector<std::string> found = state_->options.discover();
      std::lock_guard<std::mutex> guard(state_->mutex);
      state_->discovered = std::move(found);
    }
    if (unavailable().empty()) {
      probe_returning();
      lock.lock();
      continue;
    }
    {
      std::lock_guard<std::mutex> turn(forward_mutex_);
      if (!pod() && !unavailable().empty()) {
        try {
          const auto start = Clock::now();
          std::shared_ptr<Impl> formed = form_again();
          set_pod(formed);
          state_->event("formed",
                        "pod whole again after " +
                            std::to_string(static_cast<int>(seconds_since(start) * 1000)) +
                            " ms; " + kReplayedBy + ": " + formed->describe());
        } catch (const std::exception&) {
          // Still degraded; form_again recorded why.
        }
      }
    }
    lock.lock();
  }
}

void ClusterRunner::remember_pod(const Impl& pod) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (size_t i = 1; i < pod.nodes.size(); ++i) state_->known[pod.nodes[i].address] = pod.nodes[i];
  last_plan_ = pod.plan;
  last_nodes_ = pod.nodes;
  state_->last_spares.clear();
  for (const RankRunner& spare : pod.spares) {
    state_->last_spares.push_back({spare.node, spare.assignment.stage, spare.assignment.rank});
  }
}

std::vector<std::string> ClusterRunner::all_peers() const {
  std::vector<std::string> peers = state_->options.peers;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const std::string& address : state_->discovered) {
    if (std::find(peers.begin(), peers.end(), address) == peers.end()) peers.push_back(address);
  }
  return peers;
}

std::shared_ptr<ClusterRunner::Impl> ClusterRunner::form_again(std::vector<std::string> skip) {
  State& st = *state_;
  // First, spares in the lost nodes' places (the same plan: nothing to ship); if that
  // fails, the planner on every node that answers.
  std::optional<KeptPlan> kept;
  std::vector<std::string> kept_peers;
  std::string in_place;
  if (!skip.empty()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    kept = spares_in_place(last_plan_, last_nodes_, st.last_spares, skip, kept_peers, in_place);
  }
  // Each round leaves out the nodes that failed in the one before (could not load): at most
  // one round per node.
  for (;;) {
    std::vector<std::string> unreachable, peers, failed;
    for (const std::string& address : all_peers()) {
      if (std::find(skip.begin(), skip.end(), address) == skip.end()) {
        peers.push_back(address);
      } else {
        unreachable.push_back(address + " (lost)");
      }
    }
    std::optional<KeptPlan> spares;
    spares.swap(kept);  // once: a later round plans again
    if (spares) peers = kept_peers;
    std::shared_ptr<Impl> pod;
    std::string error;
    try {
      pod = form_pod(st, peers, true, unreachable, failed, spares ? &*spares : nullptr);
      if (spares && pod->plan == spares->plan) st.event("spares", in_place);
    } catch (const std::exception& e) {
      error = e.what();
      if (spares && failed.empty()) {
        st.event("spares",
                 "the spares could not take the lost nodes' places: " + error + "; planning again");
        continue;
      }
      if (failed.empty()) {
        std::string reason = error;
        if (!unreachable.empty()) {
          std::vector<std::string> named;
          for (const std::string& u : unreachable) {
            const auto known = st.known.find(u.substr(0, u.find(' ')));
            named.push_back(known == st.known.end() ? u : "'" + known->second.name + "' " + u);
          }
          reason += "; not answering: " + joined(named);
        }
        bool news;
        {
          std::lock_guard<std::mutex> lock(st.mutex);
          news = st.state != "degraded" || st.reason != reason;
          st.state = "degraded";
          st.reason = reason;
          st.last_attempt = Clock::now();
        }
        if (news) st.event("degraded", "the pod cannot run the model: " + reason);
        throw Error("cluster", "the pod cannot run the model: " + reason);
      }
      pod.reset();
    }
    if (!pod) {
      st.event("lost", "lost node " + named_nodes(failed) + " while forming the pod: " + error);
      skip.insert(skip.end(), failed.begin(), failed.end());
      continue;
    }
    remember_pod(*pod);
    states_lost_ = true;
    std::fill(st.seq_len.begin(), st.seq_len.end(), 0);
    std::lock_guard<std::mutex> lock(st.mutex);
    st.lost.clear();
    for (const std::string& u : unreachable) st.lost.push_back(u.substr(0, u.find(' ')));
    st.returning.clear();  // this pod asked every node that answers
    st.state = "ok";
    st.reason.clear();
    return pod;
  }
}

std::vector<std::string> ClusterRunner::settled_lost_nodes(const Impl& pod) const {
  // A node that reports its ring or stage neighbour gone may answer before this process
  // sees the neighbour's connection break: the heartbeat settles it within its timeout.
  std::vector<std::string> lost = pod.lost_nodes();
  const auto settle =
      Clock::now() + state_->options.heartbeat.timeout + state_->options.heartbeat.interval;
  while (lost.empty() && Clock::now() < settle) {
    std::this_thread::sleep_for(net::Millis(20));
    lost = pod.lost_nodes();
  }
  return lost;
}

std::string ClusterRunner::named_nodes(const std::vector<std::string>& addresses) const {
  std::string names;
  for (const std::string& address : addresses) {
    const auto known = state_->known.find(address);
    names += (names.empty() ? "'" : ", '") +
             (known == state_->known.end() ? address : known->second.name) + "' (" + address + ")";
  }
  return names;
}

void ClusterRunner::forward(const engine::Batch& batch, std::vector<float>& logits) {
  std::lock_guard<std::mutex> turn(forward_mutex_);
  State& st = *state_;
  if (pod() && begins_request(batch, st.seq_len)) take_in_returning();
  std::shared_ptr<Impl> current = pod();
  if (!current) {
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      if (st.state == "degraded" && Clock::now() - st.last_attempt < kRetryEvery) {
        throw Error("cluster", "the pod cannot run the model: " + st.reason);
      }
    }
    current = recover({});
  }
  // A pod formed since the last batch (here, by the mender, or taking nodes in) holds none
  // of the sequences: the caller runs them again before this batch can run.
  if (states_lost_) {
    states_lost_ = false;
    // State operations asked of the new pod before the caller heard of it concern states it
    // never had (the caller forgets its held states and snapshots on StatesLost).
    current->pending_states.clear();
    throw engine::StatesLost("the pod was formed again");
  }
  try {
    current->forward(batch, logits);
  } catch (const std::exception& e) {
    const std::string error = e.what();
    // A node that reports its ring neighbour gone may answer before this process sees
    // the neighbour's connection break: the heartbeat settles it within its timeout.
    const std::vector<std::string> lost = settled_lost_nodes(*current);
    // Broken either way: the next batch gets a pod formed again. Its nodes end their sessions
    // once the last reference goes, ready for the new pod.
    set_pod(nullptr);
    current.reset();
    if (lost.empty()) throw;
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      st.state = "recovering";
      st.reason = "lost " + joined(lost);
      st.lost = lost;
    }
    st.event("lost", "lost node " + named_nodes(lost) + ": " + error);
    if (++recoveries_ > kMaxRecoveries) {
      recoveries_ = 0;  // the next batch tries again
      throw Error("cluster", "gave up after " + std::to_string(kMaxRecoveries + 1) +
                                 " pods failed in a row; last: " + error);
    }
    recover(lost);
    states_lost_ = false;
    throw engine::StatesLost("lost node " + named_nodes(lost) + "; the pod was formed again");
  }
  recoveries_ = 0;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const auto seq = static_cast<size_t>(batch.seq[static_cast<size_t>(i)]);
    const auto pos = static_cast<size_t>(batch.pos[static_cast<size_t>(i)]);
    if (seq >= st.seq_len.size()) continue;
    // A write before the end rewinds the sequence, as it does in the KV cache; a gap (never
    // made by the scheduler) leaves the sequence unknown: a request begins there next.
    st.seq_len[seq] = pos <= st.seq_len[seq] ? pos + 1 : 0;
  }
}

std::shared_ptr<ClusterRunner::Impl> ClusterRunner::recover(const std::vector<std::string>& lost) {
  const auto start = Clock::now();
  std::shared_ptr<Impl> formed = form_again(lost);
  set_pod(formed);
  state_->event("formed", "pod formed again in " +
                              std::to_string(static_cast<int>(seconds_since(start) * 1000)) +
                              " ms; " + kReplayedBy + ": " + formed->describe());
  return formed;
}

void ClusterRunner::probe_returning() {
  State& st = *state_;
  std::vector<std::string> candidates;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    candidates = st.lost;
  }
  const std::vector<std::string> peers = all_peers();
  {
    const std::shared_ptr<Impl> current = pod();
    if (!current) return;
    // A spare that died is lost like any node: probed, and taken in again when it answers.
    for (const RankRunner& spare : current->spares) {
      const std::string& address = current->nodes[static_cast<size_t>(spare.node)].address;
      if (spare.remote->is_open() ||
          std::find(candidates.begin(), candidates.end(), address) != candidates.end()) {
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(st.mutex);
        st.lost.push_back(address);
      }
      candidates.push_back(address);
      st.event("lost", "lost spare '" + spare.node_name + "' (" + address + ")");
    }
    // Nodes the plan left out as unneeded are among current->nodes too: not asked.
    for (const std::string& address : peers) {
      bool in_pod = false;
      for (const NodeProfile& n : current->nodes) in_pod = in_pod || n.address == address;
      if (!in_pod && std::find(candidates.begin(), candidates.end(), address) == candidates.end()) {
        candidates.push_back(address);
      }
    }
  }
  if (candidates.empty()) return;
  if (!st.probe_transport) st.probe_transport = st.options.transport;
  if (!st.probe_transport) {
    st.probe_transport = std::make_shared<net::TcpTransport>(tcp_options(st.options));
  }
  std::vector<std::string> back;
  for (const std::string& address : candidates) {
    std::string why;
    if (std::optional<Peer> peer =
            try_connect_peer(*st.probe_transport, address, net::Millis(500), why)) {
      peer->connection->close();
      back.push_back(address);
    }
  }
  std::lock_guard<std::mutex> lock(st.mutex);
  st.returning = back;
}

void ClusterRunner::take_in_returning() {
  State& st = *state_;
  std::vector<std::string> back;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    back.swap(st.returning);
  }
  if (back.empty()) return;
  const auto start = Clock::now();
  set_pod(nullptr);  // its nodes end their sessions now, ready for the new pod
  std::shared_ptr<Impl> formed = form_again();
  set_pod(formed);
  st.event("joined", "node " + joined(back) + " joined; pod formed again in " +
                         std::to_string(static_cast<int>(seconds_since(start) * 1000)) + " ms; " +
                         kReplayedBy + ": " + formed->describe());
}

}  // namespace herd::cluster
