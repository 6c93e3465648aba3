// How the hub checks the work pods did (issue 19; docs/network.md "Verification"): a sample
// of served requests is replayed on another pod (POST /api/verify: the prompt and the served
// tokens in one prefill), which scores each served token as its sampler's draw. judge()
// reads that answer: every token must be a plausible draw, else the request fails its check.
//
//   greedy (temperature 0)  each token's logit within `greedy_gap` of the best one (other
//                           CPUs and kernels round differently: near-ties may flip)
//   sampled                 each token's probability at the temperature, over the whole
//                           vocabulary, at least `min_probability` (a token no honest draw
//                           gives); and the tokens together as likely as honest draws:
//                             z = sum(log p + entropy) / sqrt(sum(variance) + n x kNoise)
//                           at least `min_z`. An honest sampler's z is about normal around 0
//                           (above it when top-k/top-p/min-p cut the tail); another model's
//                           tokens are less likely under this one and sink z by their number.
//
// The thresholds are set from measurements of honest pods on other kernels and thread
// counts (bench/check_thresholds.sh, docs/network.md): honest pods never come near them; a
// pod serving another model, or invented tokens, fails.
//
// Which requests are checked: every pod's first kAlwaysChecked requests (a new identity
// earns trust before it is sampled), then each with probability `sample_rate`.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace herd::hub {

struct CheckThresholds {
  double min_probability = 1e-9;
  float greedy_gap = 0.5f;
  double min_z = -6;
};

// Per token, the variance that other kernels' rounding may add to log p.
inline constexpr double kNoise = 0.01;

inline constexpr int64_t kAlwaysChecked = 3;

struct Verdict {
  bool passed = false;
  int64_t tokens = 0;       // scored
  int64_t implausible = 0;  // of which failed the threshold
  std::string detail;       // the first implausible token, or why the answer is unreadable
  // The least plausible token's figures, for setting the thresholds from measurements:
  // the lowest probability of a sampled token, the largest gap of a greedy one.
  double min_probability = 1;
  double max_gap = 0;
  double z = 0;  // sampled tokens' (0 when greedy)
};

// Reads a checker's answer for `served` tokens. An answer that is not one (wrong count,
// missing fields) is a failed check of the checker, not of the pod: throws herd::Error.
Verdict judge(const nlohmann::json& answer, size_t served, const CheckThresholds& thresholds);

// Whether to check a request: `checked` is how many of the pod's requests were checked
// before; `draw` a uniform number in [0, 1).
bool should_check(int64_t checked, double sample_rate, double draw);

}  // namespace herd::hub
