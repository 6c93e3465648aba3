#include "plan/plan_table.h"

#include <cstdarg>
#include <cstdio>

#include "plan/device_ranks.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {
namespace {

// "all" for the whole of [0, n), "-" for nothing, else "[begin,end)".
std::string range_text(int64_t begin, int64_t end, int64_t n) {
  if (begin == end) return "-";
  if (begin == 0 && end == n) return "all";
  return "[" + std::to_string(begin) + "," + std::to_string(end) + ")";
}

std::string experts_text(const std::vector<int64_t>& experts, int64_t n_expert) {
  if (n_expert == 0) return "";
  if (experts.empty()) return "-";
  const bool contiguous =
      experts.back() - experts.front() + 1 == static_cast<int64_t>(experts.size());
  if (contiguous) return range_text(experts.front(), experts.back() + 1, n_expert);
  return std::to_string(experts.size()) + " experts";
}

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return std::string(text) + "\n";
}

// "      on vulkan:0: the first 12 layers (the rest on the CPU)"
std::string placement_line(const Rank& rank) {
  if (rank.placement == "experts-on-cpu") {
    return line("      on %s: all but the routed experts (those on the CPU)", rank.device.c_str());
  }
  if (rank.placement == "first-layers") {
    return line("      on %s: the first %lld layers (the rest on the CPU)", rank.device.c_str(),
                static_cast<long long>(rank.device_layers));
  }
  return line("      on %s: all of it", rank.device.c_str());
}

}  // namespace

std::string plan_table(const Plan& plan, const PlanModel& m, const std::vector<NodeProfile>& nodes,
                       const PlanOptions& options) {
  std::string out;
  out += "plan: " + plan.parallel + ", " + std::to_string(plan.stages.size()) +
         (plan.stages.size() == 1 ? " stage" : " stages") + ", context " +
         std::to_string(plan.n_ctx) + " x " + std::to_string(plan.n_seq) +
         (plan.n_seq == 1 ? " sequence" : " sequences");
  if (!plan.moe.empty()) out += ", MoE " + plan.moe;
  out += "\nmodel: " + m.arch + ", " + std::to_string(m.n_layer) + " layers, " +
         std::to_string(m.n_head) + " heads (" + std::to_string(m.n_head_kv) + " KV), " +
         memory_text(m.weight_bytes()) + " of weights\n";
  for (const NodeProfile& node : nodes) {
    if (!node.unified_memory || node.total_memory_bytes == 0) continue;
    out += "memory: " + node.name + ": " + memory_text(node.total_memory_bytes) + " unified, " +
           memory_text(unified_model_limit(node.total_memory_bytes)) +
           " usable by the model (the system keeps max(4 GiB, 25%)); " +
           memory_text(node.free_memory_bytes) + " free now\n";
  }
  for (const NodeProfile& node : nodes) {
    for (const DeviceProfile& d : node.devices) {
      out +=
          line("device: %s: %s %s, %s%s", node.name.c_str(), d.name.c_str(), d.description.c_str(),
               memory_text(d.memory_bytes).c_str(), d.unified ? " (the node's own memory)" : "");
      if (d.bandwidth_gbs > 0) {
        out.pop_back();
        out += line(", %.0f GB/s", d.bandwidth_gbs);
      }
    }
  }
  out +=
      line("%-5s %-14s %-16s %-21s %-9s %-9s %-13s %-9s %-15s %10s %10s", "stage", "layers", "node",
           "address", "heads", "kv heads", "ffn rows", "experts", "vocab", "memory", "usable");
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    char range[64];
    std::snprintf(range, sizeof range, "[%lld,%lld)", static_cast<long long>(stage.layer_begin),
                  static_cast<long long>(stage.layer_end));
    std::string layers = range;
    if (stage.embedding) layers += " E";
    if (stage.output) layers += " H";
    for (size_t r = 0; r < stage.ranks.size(); ++r) {
      const Rank& rank = stage.ranks[r];
      HERD_CHECK(rank.node >= 0 && static_cast<size_t>(rank.node) < nodes.size());
      const NodeProfile& node = nodes[static_cast<size_t>(rank.node)];
      out += line(
          "%-5s %-14s %-16.16s %-21.21s %-9s %-9s %-13s %-9s %-15s %10s %10s",
          r == 0 ? std::to_string(s).c_str() : "", r == 0 ? layers.c_str() : "", node.name.c_str(),
          node.address.c_str(), range_text(rank.head_begin, rank.head_end, m.n_head).c_str(),
          range_text(rank.kv_head_begin, rank.kv_head_end, m.n_head_kv).c_str(),
          range_text(rank.ff_begin, rank.ff_end, m.n_ff).c_str(),
          experts_text(rank.experts, m.n_expert).c_str(),
          stage.output ? range_text(rank.vocab_begin, rank.vocab_end, m.n_vocab).c_str() : "",
          memory_text(rank.memory_bytes).c_str(),
          memory_text(node_capacity(node, options, rank_splits(stage.ranks.size()))).c_str());
      if (!rank.device.empty()) out += placement_line(rank);
    }
    if (!stage.shared_kv_heads.empty()) {
      std::string shared;
      for (int64_t kv : stage.shared_kv_heads)
        shared += (shared.empty() ? "" : ", ") + std::to_string(kv);
      out += "      KV heads held by several ranks: " + shared + "\n";
    }
  }
  out += "E: embeds the tokens, H: output head. Ranges are [begin,end).\n";
  for (const std::string& note : plan.notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace herd
