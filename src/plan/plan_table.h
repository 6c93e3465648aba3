// plan_table(): a plan as a table for people: one line per rank, then the notes.
#pragma once

#include <string>
#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// REQUIRES: every rank's node indexes `nodes`. Usable memory is shown with the options'
// headroom. A node with unified memory gets a line saying how much of it the model may use
// ("memory: mac-1: 48.00 GiB unified, 36.00 GiB usable by the model ...").
std::string plan_table(const Plan& plan, const PlanModel& model,
                       const std::vector<NodeProfile>& nodes, const PlanOptions& options);

}  // namespace herd
