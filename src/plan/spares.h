// Spares (`--spare N`): the last N nodes are kept out of the plan, each loaded with one
// remote rank's weights so that it can take that rank's place when its node is lost,
// without a shipment (docs/cluster.md "Spares"). Which node stands by for which rank is
// decided here, for the coordinator and for `herd plan`.
#pragma once

#include <functional>
#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"

namespace herd {

struct Spare {
  int node = 0;  // index into the node list
  int stage = 0, rank = 0;
};

struct SparePlan {
  Plan plan;                  // on every node but the spares
  std::vector<Spare> spares;  // may be fewer than asked: see n_spares
  int n_spares = 0;           // nodes kept out as spares (< wanted when the model needs them)
};

// Plans (with `plan_on`, given the leading nodes) on every node but the last `wanted`,
// fewer when the others cannot hold the model; then each spare j stands by for a remote
// rank whose memory it can hold, trying rank j first so that spares cover different ranks.
// Throws what `plan_on` throws when even all the nodes cannot hold the model.
SparePlan plan_with_spares(const std::vector<NodeProfile>& nodes, int wanted,
                           const PlanOptions& options,
                           const std::function<Plan(const std::vector<NodeProfile>&)>& plan_on);

}  // namespace herd
