// Requests per API key (issue 19, "Security"): a token bucket per key, refilled at
// `per_minute` / 60 a second up to `burst`; a request takes one token or is refused with the
// seconds until one is there (HTTP 429 and Retry-After). Keys may be many (the hub limits
// registrations per client address): once there are kPruneAbove buckets, those full again
// are forgotten (the memory is bounded by the keys active within burst / rate). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace herd::hub {

class RateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // per_minute <= 0: no limit. burst < 1: per_minute (a minute's worth at once).
  explicit RateLimit(double per_minute, double burst = 0);

  // 0 when the request may go now (its token taken), else the seconds to wait for one.
  double take(const std::string& key, Clock::time_point now = Clock::now());
  bool limited() const { return per_second_ > 0; }
  size_t keys() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return buckets_.size();
  }

  static constexpr size_t kPruneAbove = 4096;

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at;
  };
  void prune(Clock::time_point now);  // under the lock

  double per_second_;
  double burst_;
  mutable std::mutex mutex_;  // guards what follows
  std::unordered_map<std::string, Bucket> buckets_;
  size_t prune_above_ = kPruneAbove;  // twice what was left after the last pruning
};

}  // namespace herd::hub
