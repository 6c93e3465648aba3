#include "plan/device_ranks.h"

#include <algorithm>
#include <cmath>

#include "engine/backend.h"
#include "engine/device_placement.h"
#include "plan/rank_memory.h"

namespace herd {
namespace {

uint64_t device_room(const DeviceProfile& d, const PlanOptions& options) {
  return static_cast<uint64_t>(std::floor(static_cast<double>(d.memory_bytes) *
                                          std::clamp(options.memory_headroom, 0.0, 1.0)));
}

// The bytes of a one-rank stage's part, layer by layer, for engine::place_on_device: each
// layer's weights (an MoE layer's FFN counted as its routed experts), the rank's cache
// spread evenly over its layers, the embedding and the head where it has them.
engine::PartBytes part_of(const PlanModel& m, const PlanOptions& options, const Stage& stage,
                          const Rank& rank) {
  engine::PartBytes part;
  const int64_t n = stage.layer_end - stage.layer_begin;
  const uint64_t cache = estimate_memory(m, options, rank_load(m, stage, rank)).kv_cache;
  for (int64_t il = stage.layer_begin; il < stage.layer_end; ++il) {
    const PlanLayer& l = m.layers[static_cast<size_t>(il)];
    part.layers.push_back(l.total());
    part.experts.push_back(m.moe() && il >= m.hp.n_leading_dense ? l.ffn_bytes : 0);
    part.caches.push_back(n > 0 ? cache / static_cast<uint64_t>(n) : 0);
  }
  if (rank.embedding) part.embedding = m.embedding_bytes;
  if (stage.output) part.head = m.output_bytes + m.output_norm_bytes;
  return part;
}

}  // namespace

bool rank_splits(size_t stage_ranks) {
  return stage_ranks == 1;
}

uint64_t node_capacity(const NodeProfile& node, const PlanOptions& options, bool split) {
  const uint64_t cpu = usable_memory(node, options);
  if (node.devices.empty() || node.devices.front().unified) return cpu;
  const uint64_t gpu = device_room(node.devices.front(), options);
  return split ? cpu + gpu : std::max(cpu, gpu);
}

double node_read_seconds(const NodeProfile& node, double bytes, const PlanOptions& options,
                         bool split) {
  const double cpu = node.bandwidth_gbs * 1e9;
  if (node.devices.empty() || !(node.devices.front().bandwidth_gbs > 0)) return bytes / cpu;
  const DeviceProfile& d = node.devices.front();
  const double gpu = d.bandwidth_gbs * 1e9;
  const double room = static_cast<double>(device_room(d, options));
  if (bytes <= room || d.unified) return bytes / gpu;
  return split ? room / gpu + (bytes - room) / cpu : bytes / cpu;
}

void place_ranks_on_devices(const PlanModel& model, const std::vector<NodeProfile>& nodes,
                            const PlanOptions& options, Plan& plan) {
  for (Stage& stage : plan.stages) {
    for (Rank& rank : stage.ranks) {
      const NodeProfile& node = nodes[static_cast<size_t>(rank.node)];
      if (node.devices.empty()) continue;
      const DeviceProfile& d = node.devices.front();
      const std::string who =
          "node '" + node.name + "' (stage " + std::to_string(&stage - plan.stages.data()) + "): ";
      if (model.arch_row != nullptr) {
        const std::string missing =
            engine::vulkan_unsupported(*model.arch_row, model.hp, stage.ranks.size() > 1);
        if (!missing.empty()) {
          plan.notes.push_back(who + "on the CPU: " + d.name + " cannot run " + model.arch +
                               " yet (" + missing + ")");
          continue;
        }
      }
      if (!rank_splits(stage.ranks.size())) {
        // A tensor-parallel rank: its part on the GPU when it fits there, else on the CPU.
        if (rank.memory_bytes <= device_room(d, options)) {
          rank.device = d.name;
          rank.placement = "device";
          plan.notes.push_back(who + "its part (" + memory_text(rank.memory_bytes) + ") on " +
                               d.name + " " + d.description);
        } else {
          plan.notes.push_back(who + "its part (" + memory_text(rank.memory_bytes) + ") outgrows " +
                               d.name + " (" + memory_text(d.memory_bytes) +
                               "): on the CPU (a tensor-parallel rank runs on one device)");
        }
        continue;
      }
      const engine::DevicePlacement p = engine::place_on_device(
          part_of(model, options, stage, rank), d.memory_bytes, options.memory_headroom,
          engine::ExpertsChoice::kAuto, -1, d.name);
      rank.device = d.name;
      switch (p.kind) {
        case engine::DevicePlacement::kDevice:
          rank.placement = "device";
          break;
        case engine::DevicePlacement::kExpertsOnCpu:
          rank.placement = "experts-on-cpu";
          break;
        case engine::DevicePlacement::kFirstLayers:
          rank.placement = "first-layers";
          rank.device_layers = p.device_layers;
          break;
      }
      plan.notes.push_back(who + p.why);
    }
  }
}

}  // namespace herd
