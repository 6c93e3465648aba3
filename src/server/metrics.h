// Metrics: counters the scheduler and the HTTP layer update, rendered as Prometheus text
// (GET /metrics) and as a small JSON object for the page. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/scheduler_observer.h"

namespace herd::server {

class Metrics final : public engine::SchedulerObserver {
 public:
  Metrics();

  void count_request(const std::string& endpoint, int status);
  void add_prompt_tokens(int64_t n_prefilled, int64_t n_cached) override;
  void add_completion_tokens(int64_t n) override;
  void observe_ttft(double seconds) override;
  void set_queue(int64_t queued, int64_t running) override;

  // Prometheus text exposition format 0.0.4.
  std::string prometheus() const;
  // {"requests", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "queued",
  //  "running", "tokens_per_second", "ttft_mean"}
  nlohmann::json summary() const;

  // Generated tokens per second over the last few seconds.
  double tokens_per_second() const;

  // Upper bounds of the time-to-first-token histogram buckets, in seconds.
  static constexpr std::array<double, 10> kTtftBuckets = {0.05, 0.1, 0.25, 0.5, 1,
                                                          2.5,  5,   10,   30,  60};

 private:
  using Clock = std::chrono::steady_clock;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  int64_t queued_ = 0, running_ = 0;
  std::array<int64_t, kTtftBuckets.size()> ttft_counts_{};  // not cumulative
  int64_t ttft_count_ = 0;
  double ttft_sum_ = 0;
  // Completion tokens per wall-clock second, one bucket per second for the last kWindow
  // seconds (stamp: which second a bucket counts).
  static constexpr int kWindow = 5;
  std::array<int64_t, kWindow> recent_{};
  std::array<int64_t, kWindow> recent_stamp_{};
  Clock::time_point start_;
  int64_t now_second() const;
};

}  // namespace herd::server
