// The pod as it is now, for the live view (GET /api/cluster), `herd nodes`, serve and bench:
// status(), cluster_json(), unavailable(), describe() and the figures they report (per-stage
// stats, the prediction). Safe from any thread while forward() runs (cluster_runner.h says
// how).
#include <algorithm>
#include <mutex>

#include "cluster/cluster_runner_state.h"

namespace herd::cluster {

std::string ClusterRunner::describe() const {
  const std::shared_ptr<Impl> current = pod();
  if (current) return current->describe();
  std::lock_guard<std::mutex> lock(state_->mutex);
  return "no pod: " + state_->reason;
}

engine::RunnerStatus ClusterRunner::status() const {
  engine::RunnerStatus out;
  out.node = "coordinator";
  out.pod = true;
  out.threads = state_->options.local.threads;
  out.isa = "cluster";
  out.device = "pod";
  // The pod last formed (kept while it is formed again), under the lock remember_pod takes.
  std::lock_guard<std::mutex> lock(state_->mutex);
  out.parallel = last_plan_.parallel;
  for (const Stage& s : last_plan_.stages) {
    engine::StageStatus stage{s.layer_begin, s.layer_end, {}};
    for (const Rank& r : s.ranks) {
      const NodeProfile& node = last_nodes_.at(static_cast<size_t>(r.node));
      stage.ranks.push_back({r.node == 0 ? "coordinator" : node.name, node.address, r.head_begin,
                             r.head_end, r.memory_bytes});
    }
    out.stages.push_back(std::move(stage));
  }
  return out;
}

std::vector<StageStats> ClusterRunner::stage_stats() const {
  std::vector<StageStats> out;
  const std::shared_ptr<Impl> current = pod();
  if (!current) return out;
  for (const auto& s : current->stages) {
    std::lock_guard<std::mutex> lock(s->stats_mutex);
    out.push_back(s->stats);
  }
  return out;
}

void ClusterRunner::reset_stats() {
  const std::shared_ptr<Impl> current = pod();
  if (!current) return;
  for (auto& s : current->stages) {
    std::lock_guard<std::mutex> lock(s->stats_mutex);
    StageStats fresh;
    fresh.node = s->stats.node;
    fresh.layer_begin = s->stats.layer_begin;
    fresh.layer_end = s->stats.layer_end;
    s->stats = fresh;
  }
  std::lock_guard<std::mutex> lock(current->mutex);
  current->forward_seconds = 0;
}

Prediction ClusterRunner::prediction(int64_t prompt_tokens) const {
  const std::shared_ptr<Impl> current = pod();
  if (!current) return {};
  PredictCosts costs = state_->predict_costs();
  costs.prompt_tokens = std::max<int64_t>(1, prompt_tokens);
  return predict(current->plan, state_->model, current->nodes, current->links,
                 current->plan_options, costs);
}

double ClusterRunner::forward_seconds() const {
  const std::shared_ptr<Impl> current = pod();
  if (!current) return 0;
  std::lock_guard<std::mutex> lock(current->mutex);
  return current->forward_seconds;
}

std::string ClusterRunner::unavailable() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->state == "degraded" ? state_->reason : std::string();
}

namespace {

// The prompt the live view's prediction is for.
constexpr int64_t kViewPromptTokens = 256;

// The pod's nodes: each one's profile, its state ("up", "unused"; a spare's "spare" or
// "lost", and the rank it stands by for) and its link from this process.
nlohmann::json pod_nodes_json(const ClusterRunner::Impl& pod) {
  nlohmann::json nodes = nlohmann::json::array();
  std::vector<bool> used(pod.nodes.size(), false);
  for (const Stage& stage : pod.plan.stages) {
    for (const Rank& rank : stage.ranks) used[static_cast<size_t>(rank.node)] = true;
  }
  for (size_t i = 0; i < pod.nodes.size(); ++i) {
    nlohmann::json n = to_json(pod.nodes[i]);
    n["index"] = i;
    n["state"] = used[i] ? "up" : "unused";
    if (i > 0) {
      const LinkProfile& l = pod.links.to_node[i];
      n["link"] = {{"rtt_ms", l.rtt_seconds * 1e3},
                   {"send_gbits", l.send_bytes_per_s * 8e-9},
                   {"receive_gbits", l.receive_bytes_per_s * 8e-9},
                   {"measured", l.measured}};
    }
    for (const RankRunner& spare : pod.spares) {
      if (spare.node != static_cast<int>(i)) continue;
      const int stage = spare.assignment.stage, rank = spare.assignment.rank;
      const int node =
          pod.plan.stages[static_cast<size_t>(stage)].ranks[static_cast<size_t>(rank)].node;
      n["state"] = spare.remote->is_open() ? "spare" : "lost";
      n["stands_by"] = {
          {"stage", stage}, {"rank", rank}, {"node", pod.nodes[static_cast<size_t>(node)].name}};
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// Links measured between nodes (stage links and rings run on them).
nlohmann::json node_links_json(const ClusterRunner::Impl& pod) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& [pair, l] : pod.links.between) {
    links.push_back({{"from", pod.nodes[static_cast<size_t>(pair.first)].name},
                     {"to", pod.nodes[static_cast<size_t>(pair.second)].name},
                     {"rtt_ms", l.rtt_seconds * 1e3},
                     {"send_gbits", l.send_bytes_per_s * 8e-9},
                     {"receive_gbits", l.receive_bytes_per_s * 8e-9}});
  }
  return links;
}

}  // namespace

nlohmann::json ClusterRunner::cluster_json() const {
  const State& st = *state_;
  const std::shared_ptr<Impl> current = pod();
  nlohmann::json out;
  std::vector<std::string> lost;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    out["state"] = st.state;
    out["reason"] = st.reason;
    out["events"] = nlohmann::json::array();
    for (const nlohmann::json& e : st.events) out["events"].push_back(e);
    lost = st.lost;
  }
  out["nodes"] = nlohmann::json::array();
  out["stages"] = nlohmann::json::array();
  out["forward_seconds"] = forward_seconds();
  if (current) {
    out["parallel"] = current->plan.parallel;
    out["plan"] = to_json(current->plan);
    const Prediction predicted = prediction(kViewPromptTokens);
    out["prediction"] = {{"decode_tokens_per_s", predicted.decode_tokens_per_s},
                         {"prefill_tokens_per_s", predicted.prefill_tokens_per_s}};
    out["nodes"] = pod_nodes_json(*current);
    out["node_links"] = node_links_json(*current);
  } else {
    out["parallel"] = "";
    out["plan"] = nullptr;
  }
  for (const std::string& address : lost) {
    if (current && std::any_of(current->nodes.begin(), current->nodes.end(),
                               [&](const NodeProfile& p) { return p.address == address; })) {
      continue;  // a lost spare: listed with the pod's nodes
    }
    nlohmann::json n;
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      const auto known = st.known.find(address);
      if (known != st.known.end()) n = to_json(known->second);
    }
    n["address"] = address;
    n["index"] = nullptr;
    n["state"] = "lost";
    out["nodes"].push_back(std::move(n));
  }
  for (const StageStats& s : stage_stats()) {
    out["stages"].push_back({{"index", out["stages"].size()},
                             {"node", s.node},
                             {"layers", {s.layer_begin, s.layer_end}},
                             {"batches", s.batches},
                             {"tokens", s.tokens},
                             {"compute_seconds", s.compute_seconds},
                             {"busy_seconds", s.busy_seconds},
                             {"bytes_sent", s.bytes_sent},
                             {"bytes_received", s.bytes_received},
                             {"link_bytes_received", s.link_bytes_received}});
  }
  return out;
}

}  // namespace herd::cluster
