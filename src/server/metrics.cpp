#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace herd::server {

Metrics::Metrics() : start_(Clock::now()) {
  recent_stamp_.fill(-1);
}

int64_t Metrics::now_second() const {
  return std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count();
}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::add_prompt_tokens(int64_t n_prefilled, int64_t n_cached) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += n_prefilled;
  cached_tokens_ += n_cached;
}

void Metrics::add_completion_tokens(int64_t n) {
  std::lock_guard lock(mutex_);
  completion_tokens_ += n;
  const int64_t second = now_second();
  const size_t i = static_cast<size_t>(second % kWindow);
  if (recent_stamp_[i] != second) {
    recent_stamp_[i] = second;
    recent_[i] = 0;
  }
  recent_[i] += n;
}

void Metrics::observe_ttft(double seconds) {
  std::lock_guard lock(mutex_);
  ++ttft_count_;
  ttft_sum_ += seconds;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    if (seconds <= kTtftBuckets[i]) {
      ++ttft_counts_[i];
      break;
    }
  }
}

void Metrics::set_queue(int64_t queued, int64_t running) {
  std::lock_guard lock(mutex_);
  queued_ = queued;
  running_ = running;
}

double Metrics::tokens_per_second() const {
  std::lock_guard lock(mutex_);
  // The finished seconds of the window; the current one is still filling.
  const int64_t now = now_second();
  int64_t n = 0, seconds = 0;
  for (int64_t s = now - kWindow + 1; s < now; ++s) {
    if (s < 0) continue;
    ++seconds;
    const size_t i = static_cast<size_t>(s % kWindow);
    if (recent_stamp_[i] == s) n += recent_[i];
  }
  return seconds > 0 ? static_cast<double>(n) / static_cast<double>(seconds) : 0.0;
}

std::string Metrics::prometheus() const {
  const double tps = tokens_per_second();
  std::lock_guard lock(mutex_);
  std::string out;
  char line[256];
  out += "# HELP herd_requests_total HTTP requests by endpoint and status.\n";
  out += "# TYPE herd_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    std::snprintf(line, sizeof line, "herd_requests_total{endpoint=\"%s\",status=\"%d\"} %lld\n",
                  key.first.c_str(), key.second, static_cast<long long>(n));
    out += line;
  }
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                  type, name, value);
    out += line;
  };
  metric("herd_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
         static_cast<double>(prompt_tokens_));
  metric("herd_prompt_tokens_cached_total", "counter",
         "Prompt tokens reused from a slot's prefix cache.", static_cast<double>(cached_tokens_));
  metric("herd_completion_tokens_total", "counter", "Tokens generated.",
         static_cast<double>(completion_tokens_));
  metric("herd_queue_depth", "gauge", "Requests waiting for a slot.", static_cast<double>(queued_));
  metric("herd_requests_running", "gauge", "Requests holding a slot.",
         static_cast<double>(running_));
  metric("herd_tokens_per_second", "gauge", "Generated tokens per second over the last seconds.",
         tps);
  out += "# HELP herd_time_to_first_token_seconds From request to first generated token.\n";
  out += "# TYPE herd_time_to_first_token_seconds histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    cumulative += ttft_counts_[i];
    std::snprintf(line, sizeof line, "herd_time_to_first_token_seconds_bucket{le=\"%g\"} %lld\n",
                  kTtftBuckets[i], static_cast<long long>(cumulative));
    out += line;
  }
  std::snprintf(line, sizeof line,
                "herd_time_to_first_token_seconds_bucket{le=\"+Inf\"} %lld\n"
                "herd_time_to_first_token_seconds_sum %.17g\n"
                "herd_time_to_first_token_seconds_count %lld\n",
                static_cast<long long>(ttft_count_), ttft_sum_,
                static_cast<long long>(ttft_count_));
  out += line;
  return out;
}

nlohmann::json Metrics::summary() const {
  const double tps = tokens_per_second();
  std::lock_guard lock(mutex_);
  int64_t requests = 0;
  for (const auto& [key, n] : requests_) requests += n;
  return {{"requests", requests},
          {"prompt_tokens", prompt_tokens_},
          {"cached_prompt_tokens", cached_tokens_},
          {"completion_tokens", completion_tokens_},
          {"queued", queued_},
          {"running", running_},
          {"tokens_per_second", tps},
          {"ttft_mean", ttft_count_ > 0 ? ttft_sum_ / static_cast<double>(ttft_count_) : 0.0}};
}

}  // namespace herd::server
