#include "engine/request_speed.h"

#include <utility>

#include "util/error.h"

namespace herd::engine {

GenerationParams timing_request(std::vector<int32_t> prompt, int64_t n_decode, bool cold) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  // The first token comes from the prompt's last pass; n_decode more take a pass each.
  p.max_tokens = n_decode > 0 ? n_decode + 1 : 0;
  p.sampler.temperature = 0;
  p.stop_at_eog = false;
  p.cold = cold;
  return p;
}

RequestSpeed time_request(Scheduler& scheduler, std::vector<int32_t> prompt, int64_t n_decode,
                          bool cold) {
  auto stream = scheduler.submit(timing_request(std::move(prompt), n_decode, cold));
  RequestSpeed speed;
  speed.finish = scheduler.drive(*stream, [](const StreamUpdate&) { return true; });
  if (speed.finish.reason == FinishReason::kError) throw Error("engine", speed.finish.error);
  speed.n_prefilled = speed.finish.n_prompt - speed.finish.n_cached;
  speed.n_decoded = std::max<int64_t>(0, speed.finish.n_completion - 1);
  return speed;
}

}  // namespace herd::engine
