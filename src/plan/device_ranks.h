// A node's GPU in the plan (issue 30): the planner sees it as a rank of its node beside the
// CPU, with its own memory and bandwidth, and places each rank's part with
// engine::place_on_device (device_placement.h): the whole part on the GPU when it fits, else
// the routed experts on the CPU (MoE), else the first layers on the GPU and the rest on the
// CPU. A node alone runs its part over both; a node of a pod runs its part on its GPU when
// it fits there and on its CPU otherwise (a pod node's part split over its GPU and CPU is not
// built yet), and the planner counts memory and speed accordingly.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// The bytes a node offers one rank: its CPU's usable memory (usable_memory()), and its GPU's
// (memory times the headroom; an integrated GPU's memory is the node's own and adds nothing):
// added when the node is alone, the larger of the two in a pod.
uint64_t node_capacity(const NodeProfile& node, const PlanOptions& options, bool alone);

// Seconds per token to read `bytes` of weights on `node`: the GPU's share at its bandwidth
// (the whole, when it holds them; as much as fits, when the node is alone), the rest at the
// CPU's. A GPU that has not measured its bandwidth counts at the CPU's.
double node_read_seconds(const NodeProfile& node, double bytes, const PlanOptions& options,
                         bool alone);

// Sets each rank's device, placement and device_layers for its node's first GPU, and adds
// one line per such rank to plan.notes saying why. Ranks of nodes without a GPU stay as
// they are (the CPU).
void place_ranks_on_devices(const PlanModel& model, const std::vector<NodeProfile>& nodes,
                            const PlanOptions& options, Plan& plan);

}  // namespace herd
