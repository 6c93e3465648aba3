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
// A check proves a pass only with enough evidence (Verdict::conclusive): every greedy token
// is judged alone, but sampled tokens are judged together, and a few of another model's
// draws can look honest (8 tokens of a smaller random model passed at z > -6 on the network
// proof; 12 sank to -7.4). A pass of fewer than `min_sampled_tokens` sampled tokens is
// inconclusive: the pod earns no trust by it, an untrusted pod's answer is not sent (another
// pod answers), and a trusted pod's share is paid at settling, not at once (verifier.h).
// A failure is conclusive at any length.
//
// Which requests are checked: every pod's first kAlwaysChecked requests (a new identity
// earns trust before it is sampled), then each with probability `sample_rate`.
//
// Who checks (issue 28): only pods that may_check(): a seed the operator named, or a pod
// that passed a check decided by such a checker and never failed one. A verdict is a vote
// of one checker; a failure is always confirmed by a second checker, a pod's first pass and
// a sample of the others too (wants_another); when two disagree a third decides, and the
// checker the majority overrules loses reputation (decide). A pod's reputation is a
// function of its counts (reputation_of), so every hub replica reading the same record
// (pod_records.h) agrees on it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hub/pod_records.h"

namespace herd::hub {

struct CheckThresholds {
  double min_probability = 1e-9;
  float greedy_gap = 0.5f;
  double min_z = -6;
  int64_t min_sampled_tokens = 16;  // fewer sampled tokens: a pass is inconclusive
};

// Per token, the variance that other kernels' rounding may add to log p.
inline constexpr double kNoise = 0.01;

inline constexpr int64_t kAlwaysChecked = 3;
// Passes (and no failure) before a pod's answers go to clients unchecked and it is paid by
// settling: one pass of a short sampled answer may be luck (docs/network.md), three are not.
inline constexpr int64_t kTrustedPasses = 3;

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
  // Whether the verdict is proof: a failure, or a pass of greedy tokens or of at least
  // min_sampled_tokens sampled ones.
  bool conclusive = true;
};

// Reads a checker's answer for `served` tokens. An answer {"unscorable": why} (ids beyond
// the checker's context or max_tokens, not of its vocabulary: no honest pod serves those)
// is a failed check with that reason. An answer that is not one (wrong count,
// missing fields) is a failed check of the checker, not of the pod: throws herd::Error.
Verdict judge(const nlohmann::json& answer, size_t served, const CheckThresholds& thresholds);

// Whether to check a request: `checked` is how many of the pod's requests were checked
// before; `draw` a uniform number in [0, 1).
bool should_check(int64_t checked, double sample_rate, double draw);

// Whether the text a pod sent its client is the text of the ids it was paid for, as the
// checker rendered them ("content": its detokenization, cut at the request's stop strings,
// and for chat the message content its output parser gives). Whitespace at either end is
// not compared (templates and parsers trim it). "" when it is; else why not.
std::string text_mismatch(const std::string& sent, const nlohmann::json& answer);

// A pod's reputation from its counts: a new identity's kNewReputation, kReputationGain more
// for each pass (up to 1; a seed starts at 1), times kReputationLoss for each failure (one
// failure puts it below kMinReputation for good) and kOverruledLoss for each time the
// majority overruled it as a checker.
inline constexpr double kNewReputation = 0.5;
inline constexpr double kReputationGain = 0.1;
inline constexpr double kReputationLoss = 0.02;
inline constexpr double kOverruledLoss = 0.5;
// A checker's least reputation: a seed overruled three times, a new checker twice, checks
// no more.
inline constexpr double kMinCheckerReputation = 0.25;
double reputation_of(const PodCounts& counts, bool seed);

// Whether a pod may check others' work: a seed, or one that passed a check decided by a
// checker that may check, never failed one, and keeps its reputation.
bool may_check(const PodCounts& counts, bool seed);

// One checker's verdict on one request.
struct Vote {
  std::string checker;
  bool passed = false;
};

// Whether a request's check asks one more checker after `votes` (in the order asked):
// a first failure always (one checker cannot take a pod's reputation), a first pass when
// `confirm_pass` (the pod's first pass, or a sample), and after two that disagree.
bool wants_another(std::span<const Vote> votes, bool confirm_pass);

struct Decision {
  bool decided = false;  // false: no vote
  bool passed = false;
  // Checkers on the losing side of a majority (2 of 3): each loses reputation.
  std::vector<std::string> overruled;
};

// The majority of the votes; one against one (no third checker) passes, overruling no one:
// a lone accuser is not believed, nor a lone pass punished.
Decision decide(std::span<const Vote> votes);

}  // namespace herd::hub
