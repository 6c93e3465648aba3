// The speed the router believes of a pod (issue 28): measured by the hub, not taken from the
// pod. A pod's registration says how fast it decodes; a pod that says 1e6 tok/s would take
// every request. So the hub measures each answer it relays (completion tokens over the
// seconds from sending the request to the answer's end: the pod's prefill, queue and the
// link included, as a client sees it) and routes by
//
//   unmeasured (fewer than kMinSamples answers)   min(claimed, trial cap)
//   measured                                      min(claimed, measured)
//
// where measured is a moving average (kSmoothing) of the answers of at least kMinTokens
// tokens, and the trial cap is kTrialFactor times the fastest pod of the model the hub has
// measured (kMaxUnmeasuredTokensPerS while it has measured none): a new pod is believed fast
// enough to be tried once (its answer is checked before it is sent while it is untrusted,
// and it is on probation meanwhile: verifier.h), never more. A pod's claim only ever lowers
// what it is believed: claiming more than it does gains it its first request and nothing
// after. The prefill claim is scaled down by the same factor as the decode claim.
#pragma once

#include <cstdint>

namespace herd::hub {

inline constexpr double kMaxUnmeasuredTokensPerS = 5000;
inline constexpr double kTrialFactor = 4;
inline constexpr int64_t kMinSamples = 1;
inline constexpr int64_t kMinTokens = 4;
inline constexpr double kSmoothing = 0.3;  // the newest answer's weight

struct MeasuredSpeed {
  double tokens_per_s = 0;  // moving average (0 until the first sample)
  int64_t samples = 0;

  // One relayed answer: `tokens` completion tokens in `seconds`. Ignored when too short to
  // measure (fewer than kMinTokens tokens, or no time).
  void observe(int64_t tokens, double seconds);
};

struct RoutedSpeed {
  double decode_tokens_per_s = 0;
  double prefill_tokens_per_s = 0;
};

// What the router is told of a pod that claims these speeds; `fastest`: the fastest measure
// of a pod serving its model (0: none yet).
RoutedSpeed routed_speed(const MeasuredSpeed& measured, double claimed_decode,
                         double claimed_prefill, double fastest);

}  // namespace herd::hub
