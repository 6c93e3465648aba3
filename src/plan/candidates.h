// The ways a model could run on a set of nodes, each planned and predicted: what
// `herd plan --explain` lists, and what a planner that picks by prediction chooses from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"
#include "plan/predict.h"

namespace herd {

struct Candidate {
  std::string name;          // "pipeline of 'b', 'c'", "tensor of 'b', 'c'", "'b' alone"
  std::optional<Plan> plan;  // node indices into the full node list; nullopt: does not fit
  std::string why_not;       // the planner's error when it does not fit
  Prediction prediction;
  // What it is sorted by: seconds per reply token of a typical request, one decoded token
  // and the prefill of kPromptTokensPerReplyToken prompt tokens (decode alone when some
  // candidate's prefill speed is unknown).
  double seconds = 0;
};

// As the planner weighs them (planner.h): prompts, with their history, are several times
// longer than replies.
inline constexpr double kPromptTokensPerReplyToken = 4;

// Each node alone; a pipeline and a tensor-parallel stage of all the nodes that may hold
// layers (tensor up to 8 ranks) and of the fastest k of them (by bandwidth; k down to 2);
// pipeline:P,tensor:T for every P x T = k > 3 with P, T >= 2. Sorted fastest first
// (`seconds`; candidates that do not fit last).
std::vector<Candidate> plan_candidates(const PlanModel& model,
                                       const std::vector<NodeProfile>& nodes, const Links& links,
                                       const PlanOptions& options, const PredictCosts& costs);

}  // namespace herd

namespace herd {

// The plan `--parallel auto` runs: the fastest predicted candidate that fits, with notes
// saying so and why it won (a model that fits one node may run there alone: splitting a
// model never speeds one stream's decode up except by tensor parallelism, and costs
// messages). Any other mode, or no candidate that fits: plan() as asked (which throws
// herd::Error when nothing fits).
Plan plan_fastest(const PlanModel& model, const std::vector<NodeProfile>& nodes, const Links& links,
                  const PlanOptions& options, const PredictCosts& costs);

// Why the first candidate won over the next one that fits: "1.42x 'tensor of 'b', 'c''
// (which spends 14.2 ms per token on all-reduces against 0.00 ms)". Empty with fewer than
// two that fit.
std::string why_fastest(const std::vector<Candidate>& sorted);

}  // namespace herd
