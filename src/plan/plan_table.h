// plan_table(): a plan as a table for people: one line per rank, then the notes.
#pragma once

#include <string>
#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// REQUIRES: every rank's node indexes `nodes`. Usable memory is shown with the options'
// headroom.
std::string plan_table(const Plan& plan, const PlanModel& model,
                       const std::vector<NodeProfile>& nodes, const PlanOptions& options);

}  // namespace herd
