#include "server/cluster_view.h"

#include <cstdint>
#include <map>

namespace herd::server {
namespace {

using json = nlohmann::json;

int64_t int_or(const json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
}

double number_or(const json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

json range(int64_t begin, int64_t end) {
  return json::array({begin, end});
}

}  // namespace

json single_node_status(const json& node_info, const engine::Scheduler::ForwardStats& forward) {
  const json layers = node_info.value("layers", json::object());
  const int64_t n_layer = int_or(layers, "total", 0);
  const int64_t n_head = int_or(node_info, "n_head", 0);
  const int64_t n_expert = int_or(node_info, "n_expert", 0);
  json experts = json::array();
  for (int64_t e = 0; e < n_expert; ++e) experts.push_back(e);
  const uint64_t memory = static_cast<uint64_t>(int_or(node_info, "weight_bytes", 0) +
                                                int_or(node_info, "packed_weight_bytes", 0) +
                                                int_or(node_info, "kv_cache_bytes", 0));
  const json rank = {{"node", 0},
                     {"embedding", true},
                     {"heads", range(0, n_head)},
                     {"kv_heads", range(0, int_or(node_info, "n_head_kv", n_head))},
                     {"ff", range(0, int_or(node_info, "n_ff", 0))},
                     {"experts", experts},
                     {"vocab", range(0, int_or(node_info, "n_vocab", 0))},
                     {"memory_bytes", memory}};
  const json plan = {{"parallel", "single"},
                     {"moe", ""},
                     {"n_ctx", int_or(node_info, "n_ctx", 0)},
                     {"n_seq", int_or(node_info, "slots", 1)},
                     {"stages", json::array({{{"layers", range(0, n_layer)},
                                              {"embedding", true},
                                              {"output", true},
                                              {"ranks", json::array({rank})},
                                              {"shared_kv_heads", json::array()}}})},
                     {"notes", json::array()}};
  const std::string name = node_info.value("name", "local");
  const json node = {{"name", name},
                     {"address", "local"},
                     {"cores", int_or(node_info, "cores", int_or(node_info, "threads", 1))},
                     {"threads", int_or(node_info, "threads", 1)},
                     {"isa", node_info.value("isa", "")},
                     {"device", node_info.value("device", "cpu")},
                     {"device_bytes", int_or(node_info, "device_bytes", 0)},
                     {"free_memory_bytes", int_or(node_info, "free_memory_bytes", 0)},
                     {"total_memory_bytes", int_or(node_info, "total_memory_bytes", 0)},
                     {"bandwidth_gbs", number_or(node_info, "bandwidth_gbs", 0)},
                     {"matmul_gflops", 0},
                     {"unified_memory", false},
                     {"index", 0},
                     {"state", "up"}};
  const json stage = {{"index", 0},
                      {"node", name},
                      {"layers", range(0, n_layer)},
                      {"batches", forward.batches},
                      {"tokens", forward.tokens},
                      {"compute_seconds", forward.seconds},
                      {"busy_seconds", forward.seconds},
                      {"bytes_sent", 0},
                      {"bytes_received", 0}};
  return {{"state", "ok"},
          {"reason", ""},
          {"parallel", "single"},
          {"plan", plan},
          {"nodes", json::array({node})},
          {"stages", json::array({stage})},
          {"forward_seconds", forward.seconds},
          {"events", json::array()}};
}

void add_derived_figures(json& status) {
  if (!status.is_object()) return;
  // Memory in use per node: what the plan gives its ranks there.
  std::map<int64_t, uint64_t> memory;
  const auto plan = status.find("plan");
  if (plan != status.end() && plan->is_object() && plan->contains("stages") &&
      (*plan)["stages"].is_array()) {
    for (const json& stage : (*plan)["stages"]) {
      if (!stage.is_object() || !stage.contains("ranks") || !stage["ranks"].is_array()) continue;
      for (const json& rank : stage["ranks"]) {
        if (!rank.is_object()) continue;
        memory[int_or(rank, "node", -1)] += static_cast<uint64_t>(int_or(rank, "memory_bytes", 0));
      }
    }
  }
  if (status.contains("nodes") && status["nodes"].is_array()) {
    json& nodes = status["nodes"];
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i].is_object()) continue;
      const auto used = memory.find(int_or(nodes[i], "index", static_cast<int64_t>(i)));
      nodes[i]["memory_used_bytes"] = used == memory.end() ? 0 : used->second;
    }
  }
  if (status.contains("stages") && status["stages"].is_array()) {
    for (json& stage : status["stages"]) {
      if (!stage.is_object()) continue;
      const double tokens = number_or(stage, "tokens", 0);
      const double compute = number_or(stage, "compute_seconds", 0);
      const double busy = number_or(stage, "busy_seconds", 0);
      stage["ms_per_token"] = tokens > 0 ? 1000 * compute / tokens : 0.0;
      stage["busy_ms_per_token"] = tokens > 0 ? 1000 * busy / tokens : 0.0;
      stage["tokens_per_second"] = compute > 0 ? tokens / compute : 0.0;
    }
  }
}

}  // namespace herd::server
