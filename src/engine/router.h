// The MoE router: from one token's router logits to the experts it runs through and their
// weights, for every gating the architecture table knows (softmax, as Qwen3-MoE and
// gpt-oss; sigmoid with a selection bias and grouped choice, as DeepSeek V3; sqrt-softplus
// and hash routing, as DeepSeek V4).
#pragma once

#include <cstdint>
#include <vector>

#include "model/arch.h"

namespace herd::engine {

struct RouterOptions {
  int64_t n_expert = 0;
  int64_t n_used = 0;
  Gating gating = Gating::kSoftmax;
  bool norm_weights = true;    // the chosen weights are divided by their sum
  float weights_scale = 1.0f;  // then multiplied by this
  // Grouped choice: experts form n_group equal groups; a group scores the sum of its best
  // two selection scores and only the n_group_used best groups compete.
  int64_t n_group = 1, n_group_used = 1;
};
RouterOptions router_options(const HParams& hp);

// Owns its scratch (sized once), so routing allocates nothing. Not thread-safe.
class Router {
 public:
  explicit Router(const RouterOptions& options);

  // logits: [n_expert] router outputs (bias included); selection_bias: [n_expert] added to
  // the probabilities for choosing only (DeepSeek's exp_probs_b), or null.
  // experts: [n_used] the chosen ids, best selection score first (ties: lower id first);
  // weights: [n_used] their probabilities (without the selection bias), normalised and
  // scaled as the options say.
  // fixed: [n_used] experts chosen beforehand (hash routing by token id), or null; their
  // weights are computed as for chosen ones.
  void route(const float* logits, const float* selection_bias, int32_t* experts, float* weights,
             const int32_t* fixed = nullptr);

  const RouterOptions& options() const { return o_; }

 private:
  // experts and weights from order_'s first n_used ids and probs_.
  void finish(int32_t* experts, float* weights) const;

  RouterOptions o_;
  std::vector<float> probs_, select_, group_score_;  // [n_expert], [n_expert], [n_group]
  std::vector<int32_t> order_;                       // [max(n_expert, n_group)]
};

}  // namespace herd::engine
