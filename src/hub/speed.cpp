#include "hub/speed.h"

#include <algorithm>

namespace herd::hub {

void MeasuredSpeed::observe(int64_t tokens, double seconds) {
  if (tokens < kMinTokens || !(seconds > 0)) return;
  const double rate = static_cast<double>(tokens) / seconds;
  tokens_per_s = samples == 0 ? rate : kSmoothing * rate + (1 - kSmoothing) * tokens_per_s;
  ++samples;
}

RoutedSpeed routed_speed(const MeasuredSpeed& measured, double claimed_decode,
                         double claimed_prefill, double fastest) {
  const double trial = fastest > 0 ? kTrialFactor * fastest : kMaxUnmeasuredTokensPerS;
  const double cap = measured.samples >= kMinSamples ? measured.tokens_per_s : trial;
  RoutedSpeed r;
  r.decode_tokens_per_s = std::min(claimed_decode, cap);
  const double factor = claimed_decode > 0 ? r.decode_tokens_per_s / claimed_decode : 1;
  r.prefill_tokens_per_s = claimed_prefill * factor;
  return r;
}

}  // namespace herd::hub
