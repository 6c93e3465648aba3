#include "hub/rate_limit.h"

#include <algorithm>

namespace herd::hub {

RateLimit::RateLimit(double per_minute, double burst)
    : per_second_(std::max(0.0, per_minute) / 60.0), burst_(burst >= 1 ? burst : per_minute) {}

double RateLimit::take(const std::string& key, Clock::time_point now) {
  if (per_second_ <= 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (buckets_.size() >= prune_above_) prune(now);
  auto [it, added] = buckets_.try_emplace(key, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!added) {
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(burst_, b.tokens + std::max(0.0, elapsed) * per_second_);
    b.at = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  return (1 - b.tokens) / per_second_;
}

void RateLimit::prune(Clock::time_point now) {
  // A full bucket is what a key nobody used would get: forgetting it changes nothing.
  std::erase_if(buckets_, [&](const auto& entry) {
    const Bucket& b = entry.second;
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    return b.tokens + std::max(0.0, elapsed) * per_second_ >= burst_;
  });
  prune_above_ = std::max(kPruneAbove, 2 * buckets_.size());
}

}  // namespace herd::hub
