#include "engine/router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/ops.h"
#include "util/error.h"

namespace herd::engine {

RouterOptions router_options(const HParams& hp) {
  RouterOptions o;
  o.n_expert = hp.n_expert;
  o.n_used = hp.n_expert_used;
  o.gating = hp.gating;
  o.norm_weights = hp.expert_weights_norm;
  o.weights_scale = hp.expert_weights_scale;
  o.n_group = hp.n_expert_group;
  o.n_group_used = hp.n_expert_group_used;
  return o;
}

Router::Router(const RouterOptions& o)
    : o_(o),
      probs_(static_cast<size_t>(o.n_expert)),
      select_(static_cast<size_t>(o.n_expert)),
      group_score_(static_cast<size_t>(o.n_group)),
      order_(static_cast<size_t>(std::max(o.n_expert, o.n_group))) {
  HERD_CHECK(o.n_expert > 0 && o.n_used > 0 && o.n_used <= o.n_expert);
  HERD_CHECK(o.n_group >= 1 && o.n_expert % o.n_group == 0 && o.n_group_used >= 1 &&
             o.n_group_used <= o.n_group);
}

void Router::route(const float* logits, const float* selection_bias, int32_t* experts,
                   float* weights, const int32_t* fixed) {
  const int64_t n = o_.n_expert;
  float* p = probs_.data();
  std::copy_n(logits, n, p);
  switch (o_.gating) {
    case Gating::kSoftmax:
      softmax(p, n);
      break;
    case Gating::kSigmoid:
      for (int64_t e = 0; e < n; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
      break;
    case Gating::kSqrtSoftplus:
      sqrt_softplus(p, n);
      break;
  }
  if (fixed != nullptr) {
    std::copy_n(fixed, o_.n_used, order_.data());
    finish(experts, weights);
    return;
  }
  float* s = select_.data();
  for (int64_t e = 0; e < n; ++e) s[e] = p[e] + (selection_bias ? selection_bias[e] : 0.0f);

  // Best first, lower id first among equals: the same choice on every rank and machine.
  auto better = [](const float* score) {
    return [score](int32_t a, int32_t b) {
      return score[a] > score[b] || (score[a] == score[b] && a < b);
    };
  };
  if (o_.n_group > 1 && o_.n_group_used < o_.n_group) {
    const int64_t per_group = n / o_.n_group;
    for (int64_t g = 0; g < o_.n_group; ++g) {
      const float* gs = s + g * per_group;
      float best = -std::numeric_limits<float>::infinity(), second = best;
      for (int64_t i = 0; i < per_group; ++i) {
        if (gs[i] > best) {
          second = best;
          best = gs[i];
        } else if (gs[i] > second) {
          second = gs[i];
        }
      }
      group_score_[static_cast<size_t>(g)] = per_group > 1 ? best + second : best;
    }
    int32_t* groups = order_.data();
    std::iota(groups, groups + o_.n_group, 0);
    std::partial_sort(groups, groups + o_.n_group_used, groups + o_.n_group,
                      better(group_score_.data()));
    // Experts of the groups left out cannot be chosen.
    for (int64_t k = o_.n_group_used; k < o_.n_group; ++k) {
      std::fill_n(s + groups[k] * per_group, per_group, -std::numeric_limits<float>::infinity());
    }
  }
  int32_t* order = order_.data();
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + o_.n_used, order + n, better(s));
  finish(experts, weights);
}

void Router::finish(int32_t* experts, float* weights) const {
  const int32_t* order = order_.data();
  const float* p = probs_.data();
  float sum = 0;
  for (int64_t j = 0; j < o_.n_used; ++j) {
    experts[j] = order[j];
    weights[j] = p[order[j]];
    sum += weights[j];
  }
  const float factor = (o_.norm_weights ? 1.0f / sum : 1.0f) * o_.weights_scale;
  for (int64_t j = 0; j < o_.n_used; ++j) weights[j] *= factor;
}

}  // namespace herd::engine
