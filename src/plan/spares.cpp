#include "plan/spares.h"

#include <algorithm>

#include "plan/device_ranks.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {

SparePlan plan_with_spares(const std::vector<NodeProfile>& nodes, int wanted,
                           const PlanOptions& options,
                           const std::function<Plan(const std::vector<NodeProfile>&)>& plan_on) {
  SparePlan out;
  out.n_spares = std::clamp(wanted, 0, static_cast<int>(nodes.size()) - 1);
  for (;; --out.n_spares) {
    const std::vector<NodeProfile> planned(nodes.begin(), nodes.end() - out.n_spares);
    try {
      out.plan = plan_on(planned);
      break;
    } catch (const Error&) {
      if (out.n_spares == 0) throw;
    }
  }
  std::vector<Spare> remote;  // the ranks a spare may stand by for
  for (size_t i = 0; i < out.plan.stages.size(); ++i) {
    const Stage& stage = out.plan.stages[i];
    for (size_t k = 0; k < stage.ranks.size(); ++k) {
      if (stage.ranks[k].node != 0) remote.push_back({0, static_cast<int>(i), static_cast<int>(k)});
    }
  }
  for (int j = 0; j < out.n_spares && !remote.empty(); ++j) {
    const int node = static_cast<int>(nodes.size()) - out.n_spares + j;
    const uint64_t usable = node_capacity(nodes[static_cast<size_t>(node)], options, false);
    for (size_t t = 0; t < remote.size(); ++t) {
      const Spare& candidate = remote[(static_cast<size_t>(j) + t) % remote.size()];
      const Rank& rank = out.plan.stages[static_cast<size_t>(candidate.stage)]
                             .ranks[static_cast<size_t>(candidate.rank)];
      if (rank.memory_bytes <= usable) {
        out.spares.push_back({node, candidate.stage, candidate.rank});
        break;
      }
    }
  }
  return out;
}

}  // namespace herd
