#include "hub/router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "util/error.h"

namespace herd::hub {
namespace {

[[noreturn]] void bad(const std::string& field, const std::string& problem) {
  throw Error("hub", "pod report: field '" + field + "': " + problem);
}

void check(const PodReport& r) {
  if (r.models.empty()) bad("models", "none");
  if (r.models.size() > kMaxModelsPerPod) {
    bad("models",
        std::to_string(r.models.size()) + " is more than " + std::to_string(kMaxModelsPerPod));
  }
  std::vector<ModelId> sorted = r.models;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) bad("models", "repeated");
  if (r.slots < 1 || r.slots > kMaxSlots) {
    bad("slots", std::to_string(r.slots) + " is not in 1.." + std::to_string(kMaxSlots));
  }
  // !(x > 0) also refuses NaN.
  if (!(r.decode_tokens_per_s > 0) || !std::isfinite(r.decode_tokens_per_s)) {
    bad("decode_tokens_per_s", "not a positive number");
  }
  if (!(r.prefill_tokens_per_s > 0) || !std::isfinite(r.prefill_tokens_per_s)) {
    bad("prefill_tokens_per_s", "not a positive number");
  }
}

void check_rtt(double rtt_seconds) {
  if (!(rtt_seconds >= 0) || !std::isfinite(rtt_seconds)) bad("rtt", "not a number of seconds");
}

}  // namespace

Router::Pod& Router::pod_at(PodId pod) {
  HERD_CHECK_MSG(pod < pods_.size() && pods_[pod].live, "pod " + std::to_string(pod));
  return pods_[pod];
}

const Router::Pod& Router::pod_at(PodId pod) const {
  HERD_CHECK_MSG(pod < pods_.size() && pods_[pod].live, "pod " + std::to_string(pod));
  return pods_[pod];
}

PodId Router::add(const PodReport& report, double rtt_seconds, double reputation) {
  check(report);
  check_rtt(rtt_seconds);
  PodId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<PodId>(pods_.size());
    pods_.emplace_back();
  }
  Pod& p = pods_[id];
  p = Pod{};
  p.report = report;
  p.rtt_seconds = rtt_seconds;
  p.reputation = std::clamp(reputation, 0.0, 1.0);
  p.live = true;
  ++live_pods_;
  reindex(id);
  return id;
}

void Router::update(PodId pod, const PodReport& report) {
  check(report);
  unindex(pod);  // under its old models
  pod_at(pod).report = report;
  reindex(pod);
}

void Router::set_rtt(PodId pod, double rtt_seconds) {
  check_rtt(rtt_seconds);
  pod_at(pod).rtt_seconds = rtt_seconds;
  reindex(pod);
}

void Router::set_reputation(PodId pod, double reputation) {
  pod_at(pod).reputation = std::isnan(reputation) ? 0.0 : std::clamp(reputation, 0.0, 1.0);
  reindex(pod);
}

void Router::remove(PodId pod) {
  unindex(pod);
  pod_at(pod) = Pod{};
  free_ids_.push_back(pod);
  --live_pods_;
}

void Router::started(PodId pod) {
  ++pod_at(pod).active;
  reindex(pod);
}

void Router::finished(PodId pod) {
  Pod& p = pod_at(pod);
  p.active = std::max(0, p.active - 1);
  reindex(pod);
}

bool Router::live(PodId pod) const {
  return pod < pods_.size() && pods_[pod].live;
}

int32_t Router::active(PodId pod) const {
  return pod_at(pod).active;
}

double Router::predicted_seconds(PodId pod, int64_t prompt_tokens, int64_t max_tokens) const {
  const Pod& p = pod_at(pod);
  const PodReport& r = p.report;
  const auto seconds = [&](int64_t prompt, int64_t output) {
    return static_cast<double>(prompt) / r.prefill_tokens_per_s +
           static_cast<double>(output) / r.decode_tokens_per_s;
  };
  double wait = 0;
  if (p.active >= r.slots) {
    wait = static_cast<double>(p.active - r.slots + 1) *
           seconds(kTypicalPromptTokens, kTypicalMaxTokens) / static_cast<double>(r.slots);
  }
  return p.rtt_seconds + wait + seconds(prompt_tokens, max_tokens);
}

double Router::cost(PodId pod, int64_t prompt_tokens, int64_t max_tokens) const {
  return predicted_seconds(pod, prompt_tokens, max_tokens) / pods_[pod].reputation;
}

void Router::unindex(PodId pod) {
  Pod& p = pod_at(pod);
  if (!p.indexed) return;
  for (ModelId m : p.report.models) by_model_[m].erase({p.indexed_cost, pod});
  index_entries_ -= p.report.models.size();
  p.indexed = false;
}

void Router::reindex(PodId pod) {
  unindex(pod);
  Pod& p = pod_at(pod);
  if (p.reputation < kMinReputation) return;  // distrusted: routed nothing
  p.indexed_cost = cost(pod, kTypicalPromptTokens, kTypicalMaxTokens);
  for (ModelId m : p.report.models) {
    if (m >= by_model_.size()) by_model_.resize(static_cast<size_t>(m) + 1);
    by_model_[m].insert({p.indexed_cost, pod});
  }
  index_entries_ += p.report.models.size();
  p.indexed = true;
}

std::optional<PodId> Router::route(const RouteRequest& request) const {
  if (request.model >= by_model_.size()) return std::nullopt;
  std::optional<PodId> best;
  double best_cost = std::numeric_limits<double>::infinity();
  size_t looked = 0;
  for (const auto& [typical, pod] : by_model_[request.model]) {
    if (std::find(request.exclude.begin(), request.exclude.end(), pod) != request.exclude.end()) {
      continue;
    }
    const double c = cost(pod, request.prompt_tokens, request.max_tokens);
    if (c < best_cost) {
      best_cost = c;
      best = pod;
    }
    if (++looked == kCandidates) break;
  }
  return best;
}

size_t Router::memory_bytes() const {
  // A std::set node: three pointers, a colour and the (double, id) pair, rounded by malloc.
  constexpr size_t kSetNodeBytes = 64;
  size_t bytes = pods_.capacity() * sizeof(Pod) + free_ids_.capacity() * sizeof(PodId) +
                 by_model_.capacity() * sizeof(Index) + index_entries_ * kSetNodeBytes;
  for (const Pod& p : pods_) bytes += p.report.models.capacity() * sizeof(ModelId);
  return bytes;
}

}  // namespace herd::hub
