// check_plan(): does a plan keep the planner's contract (planner.h) for this model and these
// nodes? The property tests run it on thousands of plans; a node that receives a plan can
// run it before loading anything.
#pragma once

#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// Throws herd::Error("[plan] ...") naming the first broken rule: layers not covered exactly
// once by contiguous stages; a query head, FFN row of an expert, expert or vocabulary row
// not owned exactly once within a stage; KV heads other than those the rank's query heads
// read; the embedding not on the first rank of the first stage; a node used twice (or node
// 0 under --no-local); a rank's memory_bytes not the estimate, or above its usable memory.
// The plan's n_ctx and n_seq take the place of the options'.
void check_plan(const Plan& plan, const PlanModel& model, const std::vector<NodeProfile>& nodes,
                const PlanOptions& options);

}  // namespace herd
