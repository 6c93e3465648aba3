#include "hub/demand.h"

#include <sodium.h>

#include <algorithm>
#include <tuple>

namespace herd::hub {
namespace {

// Request times kept per model: enough to count past any sensible load_after, bounded.
constexpr size_t kMaxCountedPerModel = 1024;

std::string random_token() {
  uint8_t bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  char text[sodium_base64_ENCODED_LEN(sizeof bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(text, sizeof text, bytes, sizeof bytes,
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return text;
}

}  // namespace

std::optional<size_t> choose_loader(std::span<const LoadCandidate> candidates) {
  std::optional<size_t> best;
  auto key = [](const LoadCandidate& c) {
    return std::make_tuple(c.active > 0, c.others_serving == 0,
                           static_cast<double>(c.active) / std::max(c.slots, 1), c.pod);
  };
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!best || key(candidates[i]) < key(candidates[*best])) best = i;
  }
  return best;
}

std::string Demand::pod_registered(const std::string& pod, std::vector<std::string> loadable,
                                   const std::vector<std::string>& served) {
  PodEntry& entry = pods_[pod];
  if (entry.token.empty()) {
    if (sodium_init() < 0) return "";  // no randomness: the pod is never asked to load
    entry.token = random_token();
  }
  for (const std::string& m : entry.loadable) {
    auto it = loadable_by_.find(m);
    if (it == loadable_by_.end()) continue;
    it->second.erase(pod);
    if (it->second.empty()) loadable_by_.erase(it);
  }
  entry.loadable = std::move(loadable);
  for (const std::string& m : entry.loadable) loadable_by_[m].insert(pod);
  for (const std::string& m : served) {
    auto it = loads_.find(m);
    if (it != loads_.end() && it->second.pod == pod) loads_.erase(it);
    requests_.erase(m);  // served now: its demand was met
  }
  return entry.token;
}

void Demand::pod_dropped(const std::string& pod) {
  pod_registered(pod, {}, {});
  pods_.erase(pod);
  for (auto it = loads_.begin(); it != loads_.end();) {
    it = it->second.pod == pod ? loads_.erase(it) : std::next(it);
  }
}

std::string Demand::token(const std::string& pod) const {
  const auto it = pods_.find(pod);
  return it == pods_.end() ? std::string() : it->second.token;
}

const std::vector<std::string>& Demand::loadable(const std::string& pod) const {
  static const std::vector<std::string> kNone;
  const auto it = pods_.find(pod);
  return it == pods_.end() ? kNone : it->second.loadable;
}

std::vector<std::string> Demand::pods_that_can_load(const std::string& model) const {
  const auto it = loadable_by_.find(model);
  if (it == loadable_by_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

void Demand::prune(Clock::time_point now) {
  const Clock::time_point oldest = now - options_.window;
  for (auto it = requests_.begin(); it != requests_.end();) {
    std::deque<Clock::time_point>& times = it->second;
    while (!times.empty() && times.front() <= oldest) times.pop_front();
    it = times.empty() ? requests_.erase(it) : std::next(it);
  }
  for (auto it = refused_.begin(); it != refused_.end();) {
    it = it->second <= oldest ? refused_.erase(it) : std::next(it);
  }
}

int Demand::record(const std::string& model, Clock::time_point now) {
  auto it = requests_.find(model);
  if (it == requests_.end()) {
    if (requests_.size() >= kMaxTrackedModels) prune(now);
    if (requests_.size() >= kMaxTrackedModels) return 0;
    it = requests_.emplace(model, std::deque<Clock::time_point>()).first;
  }
  std::deque<Clock::time_point>& times = it->second;
  while (!times.empty() && times.front() <= now - options_.window) times.pop_front();
  times.push_back(now);
  while (times.size() > kMaxCountedPerModel) times.pop_front();
  return static_cast<int>(times.size());
}

int Demand::count(const std::string& model, Clock::time_point now) const {
  const auto it = requests_.find(model);
  if (it == requests_.end()) return 0;
  const Clock::time_point oldest = now - options_.window;
  return static_cast<int>(std::count_if(it->second.begin(), it->second.end(),
                                        [&](Clock::time_point t) { return t > oldest; }));
}

std::optional<Demand::Load> Demand::load_of(const std::string& model, Clock::time_point now) {
  const auto it = loads_.find(model);
  if (it == loads_.end()) return std::nullopt;
  if (now - it->second.started > options_.load_timeout) {
    const std::string pod = it->second.pod;  // failed() erases the load it would refer to
    failed(model, pod, now);
    return std::nullopt;
  }
  return it->second;
}

std::string Demand::loading_on(const std::string& pod) const {
  for (const auto& [model, load] : loads_) {
    if (load.pod == pod) return model;
  }
  return "";
}

std::vector<PodId> Demand::loading_pods() const {
  std::vector<PodId> out;
  for (const auto& [model, load] : loads_) out.push_back(load.router_id);
  return out;
}

void Demand::start(const std::string& model, const std::string& pod, PodId router_id,
                   Clock::time_point now) {
  loads_[model] = Load{model, pod, router_id, now};
}

void Demand::failed(const std::string& model, const std::string& pod, Clock::time_point now) {
  const auto it = loads_.find(model);
  if (it != loads_.end() && it->second.pod == pod) loads_.erase(it);
  refused_[{model, pod}] = now;
}

bool Demand::refused_recently(const std::string& model, const std::string& pod,
                              Clock::time_point now) const {
  const auto it = refused_.find({model, pod});
  return it != refused_.end() && now - it->second < options_.window;
}

nlohmann::json Demand::view(Clock::time_point now) const {
  nlohmann::json loads = nlohmann::json::array();
  for (const auto& [model, load] : loads_) {
    loads.push_back({{"model", model},
                     {"pod", load.pod},
                     {"seconds", std::chrono::duration<double>(now - load.started).count()}});
  }
  nlohmann::json demand = nlohmann::json::array();
  for (const auto& [model, times] : requests_) {
    if (const int n = count(model, now); n > 0) {
      demand.push_back(
          {{"model", model}, {"requests", n}, {"loadable_pods", pods_that_can_load(model).size()}});
    }
  }
  return {{"loads", loads},
          {"demand", demand},
          {"load_after", options_.load_after},
          {"window_seconds", options_.window.count()}};
}

}  // namespace herd::hub
