// A node's GPU in the plan (issue 30): the planner sees it as a rank of its node beside the
// CPU, with its own memory and bandwidth, and places each rank's part with
// engine::place_on_device (device_placement.h): the whole part on the GPU when it fits, else
// the routed experts on the CPU (MoE), else the first layers on the GPU and the rest on the
// CPU. A rank that is its stage's only one runs its part over both (a pod node, and the
// coordinator for its own ranks, load it as an engine::Rank with the plan's placement; a node
// alone as the local runner); a tensor-parallel rank, whose slice runs on one device, runs on
// the GPU when the part fits there and on the CPU otherwise. The planner counts memory and
// speed accordingly.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// Whether a rank, one of `stage_ranks` ranks of its stage, may run its part over its node's
// GPU and CPU: the only rank of its stage (a tensor-parallel rank runs on one device).
bool rank_splits(size_t stage_ranks);

// The bytes a node offers one rank: its CPU's usable memory (usable_memory()), and its GPU's
// (memory times the headroom; an integrated GPU's memory is the node's own and adds nothing):
// added when the rank splits its part over both (rank_splits), else the larger of the two.
uint64_t node_capacity(const NodeProfile& node, const PlanOptions& options, bool split);

// Seconds per token to read `bytes` of weights on `node`: the GPU's share at its bandwidth
// (the whole, when it holds them; as much as fits, when the rank splits its part), the rest
// at the CPU's. A GPU that has not measured its bandwidth counts at the CPU's.
double node_read_seconds(const NodeProfile& node, double bytes, const PlanOptions& options,
                         bool split);

// Sets each rank's device, placement and device_layers for its node's first GPU, and adds
// one line per such rank to plan.notes saying why. Ranks of nodes without a GPU stay as
// they are (the CPU).
void place_ranks_on_devices(const PlanModel& model, const std::vector<NodeProfile>& nodes,
                            const PlanOptions& options, Plan& plan);

}  // namespace herd
