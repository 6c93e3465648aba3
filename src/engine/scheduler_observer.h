// SchedulerObserver: what the scheduler reports as it runs (the server's metrics are one
// observer). Called from the scheduler's thread, and set_queue also from submit()'s callers:
// implementations are thread-safe.
#pragma once

#include <cstdint>

namespace herd::engine {

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  // Prompt tokens run through the model, and those reused from a slot's cache.
  virtual void add_prompt_tokens(int64_t n_prefilled, int64_t n_cached) = 0;
  virtual void add_completion_tokens(int64_t n) = 0;
  // Time from submit() to a request's first generated token.
  virtual void observe_ttft(double seconds) = 0;
  virtual void set_queue(int64_t queued, int64_t running) = 0;
};

}  // namespace herd::engine
