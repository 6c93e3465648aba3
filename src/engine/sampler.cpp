#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "util/error.h"

namespace herd::engine {

int32_t greedy(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
  // accept() holds one more than the window for a moment: no allocation once running.
  if (params_.penalty_last_n > 0) recent_.reserve(static_cast<size_t>(params_.penalty_last_n) + 1);
}

void Sampler::reset() {
  rng_.seed(params_.seed);
  recent_.clear();
}

void Sampler::accept(int32_t token) {
  if (params_.penalty_last_n <= 0) return;
  recent_.push_back(token);
  if (static_cast<int32_t>(recent_.size()) > params_.penalty_last_n) recent_.erase(recent_.begin());
}

int32_t Sampler::sample(std::span<const float> logits, TokenFilter* filter) {
  const int32_t first = sample_unfiltered(logits);
  if (filter == nullptr || filter->allows(first)) return first;
  // Drawing from the model's distribution and keeping an allowed token, else drawing again
  // from the allowed ones, gives each allowed token p(t) / p(allowed): the masked
  // distribution, without masking when the model already agrees with the filter.
  allowed_.assign(logits.size(), 0);
  filter->allowed_tokens(allowed_);
  masked_.assign(logits.begin(), logits.end());
  bool any = false;
  for (size_t i = 0; i < masked_.size(); ++i) {
    if (allowed_[i]) {
      any = true;
    } else {
      masked_[i] = -std::numeric_limits<float>::infinity();
    }
  }
  if (!any) return -1;
  const int32_t second = sample_unfiltered(masked_);
  return allowed_[static_cast<size_t>(second)] ? second : -1;
}

bool Sampler::penalizing() const {
  const SamplerParams& p = params_;
  return !recent_.empty() &&
         (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f);
}

void Sampler::penalized_candidates(std::span<const float> logits) {
  const SamplerParams& p = params_;
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i]};
  if (!penalizing()) return;
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : recent_) ++counts[t];
  for (const auto& [token, count] : counts) {
    if (token < 0 || static_cast<size_t>(token) >= candidates_.size()) continue;
    float& l = candidates_[static_cast<size_t>(token)].logit;
    if (std::isinf(l)) continue;  // masked: stays out whatever the penalty (0 * inf is NaN)
    // Repetition penalty as in CTRL / llama.cpp: shrink positive logits, grow negative ones.
    l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
}

DrawCheck Sampler::check(std::span<const float> logits, int32_t token) {
  DrawCheck out;
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) return out;  // impossible
  penalized_candidates(logits);
  float best = candidates_[0].logit;
  for (const Candidate& c : candidates_) best = std::max(best, c.logit);
  const float own = candidates_[static_cast<size_t>(token)].logit;
  out.gap = best - own;
  if (params_.temperature <= 0.0f) {
    out.probability = out.gap <= 0.0f ? 1.0 : 0.0;
    return out;
  }
  // log p_i = (l_i - best) / T - log Z; the entropy and the variance of log p from the
  // sums of p and p log p and p (log p)^2, in doubles (the vocabulary may be 250k).
  double z = 0;
  for (const Candidate& c : candidates_) {
    z += std::exp(static_cast<double>(c.logit - best) / params_.temperature);
  }
  const double log_z = std::log(z);
  double mean = 0, square = 0;
  for (const Candidate& c : candidates_) {
    const double log_p = static_cast<double>(c.logit - best) / params_.temperature - log_z;
    const double p = std::exp(log_p);
    mean += p * log_p;
    square += p * log_p * log_p;
  }
  out.probability = std::exp(static_cast<double>(own - best) / params_.temperature - log_z);
  out.entropy = -mean;
  out.variance = std::max(0.0, square - mean * mean);
  return out;
}

size_t Sampler::chain(std::span<const float> logits) {
  const SamplerParams& p = params_;
  penalized_candidates(logits);
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = candidates_.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) n = static_cast<size_t>(p.top_k);
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(n),
                    candidates_.end(), by_logit);
  candidates_.resize(n);

  // Probabilities at temperature 1 for top-p and min-p (llama.cpp applies them before
  // the temperature), then the temperature reshapes what is left.
  probs_.resize(n);
  const float max = candidates_[0].logit;
  float sum = 0;
  for (size_t i = 0; i < n; ++i) sum += probs_[i] = std::exp(candidates_[i].logit - max);
  for (float& pr : probs_) pr /= sum;
  if (p.top_p < 1.0f) {
    float cumulative = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cumulative += probs_[i];
      if (cumulative >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (p.min_p > 0.0f) {
    const float threshold = probs_[0] * p.min_p;
    size_t keep = 1;
    while (keep < n && probs_[keep] >= threshold) ++keep;
    n = keep;
  }
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = static_cast<float>(
        std::exp(static_cast<double>(candidates_[i].logit - max) / p.temperature));
  }
  return n;
}

int32_t Sampler::sample_unfiltered(std::span<const float> logits) {
  const SamplerParams& p = params_;
  if (p.temperature <= 0.0f && !penalizing()) return greedy(logits);
  if (p.temperature <= 0.0f) {
    penalized_candidates(logits);
    auto by_logit = [](const Candidate& a, const Candidate& b) {
      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->id;
  }
  const size_t n = chain(logits);
  // The draw is written out (not std::discrete_distribution) so that a seed gives the same
  // tokens with every standard library.
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  const double u = uniform() * total;
  double cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += probs_[i];
    if (u < cumulative) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

double Sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::distribution(std::span<const float> logits, TokenProbs& out) {
  out.clear();
  if (params_.temperature <= 0.0f) {
    out.push_back({sample_unfiltered(logits), 1.0f});
    return;
  }
  const size_t n = chain(logits);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  for (size_t i = 0; i < n; ++i) {
    out.push_back({candidates_[i].id, static_cast<float>(probs_[i] / total)});
  }
}

int32_t Sampler::draw(const TokenProbs& probs) {
  HERD_CHECK(!probs.empty());
  double total = 0;
  for (const TokenProb& t : probs) total += t.p;
  const double u = uniform() * total;
  double cumulative = 0;
  for (const TokenProb& t : probs) {
    cumulative += t.p;
    if (u < cumulative) return t.id;
  }
  return probs.back().id;
}

}  // namespace herd::engine
