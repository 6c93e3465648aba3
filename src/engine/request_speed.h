// How fast the scheduler runs one request: its prefill and its decode, timed as the
// scheduler sees them (the passes, the sampling, the text). herd bench and a pod's speed
// probe for the hub measure this way, so what they report is what a request gets.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/scheduler.h"

namespace herd::engine {

struct RequestSpeed {
  Finish finish;
  int64_t n_prefilled = 0;  // prompt tokens run (the rest reused from the slot's cache)
  int64_t n_decoded = 0;    // tokens decoded after the first, one forward pass each
  double prefill_tokens_per_s() const {
    return finish.prefill_seconds > 0 ? static_cast<double>(n_prefilled) / finish.prefill_seconds
                                      : 0;
  }
  double decode_tokens_per_s() const {
    return finish.decode_seconds > 0 ? static_cast<double>(n_decoded) / finish.decode_seconds : 0;
  }
};

// A timing request: `prompt` (cold: every token, no cached prefix reused), then n_decode
// tokens decoded greedily past any end token (0: the prompt only).
GenerationParams timing_request(std::vector<int32_t> prompt, int64_t n_decode, bool cold);

// Runs `prompt` (cold: every token, no cached prefix reused) and then decodes n_decode
// tokens greedily past any end token, on this thread (Scheduler::drive). n_decode 0: the
// prompt only. Throws Error when the request fails.
RequestSpeed time_request(Scheduler& scheduler, std::vector<int32_t> prompt, int64_t n_decode,
                          bool cold);

}  // namespace herd::engine
