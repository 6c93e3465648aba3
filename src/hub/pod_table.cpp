#include "hub/pod_table.h"

#include <algorithm>

namespace herd::hub {

ModelId PodTable::hold_model(const std::string& name) {
  auto [it, added] = models_.try_emplace(name);
  if (added) {
    if (!free_model_ids_.empty()) {
      it->second.id = free_model_ids_.back();
      free_model_ids_.pop_back();
    } else {
      it->second.id = static_cast<ModelId>(models_.size() - 1 + free_model_ids_.size());
    }
  }
  ++it->second.pods;
  return it->second.id;
}

void PodTable::release_model(const std::string& name) {
  const auto it = models_.find(name);
  if (it == models_.end() || --it->second.pods > 0) return;
  // No live pod names it: the router indexes no pod under its id, which another name may
  // have from now on.
  free_model_ids_.push_back(it->second.id);
  models_.erase(it);
}

void PodTable::release_models(const Registration& r) {
  for (const ServedModel& m : r.models) release_model(m.name);
}

std::string PodTable::registered(const Registration& r, const PodAddress& address,
                                 Clock::time_point now) {
  PodReport report;
  report.slots = r.slots;
  report.decode_tokens_per_s = r.decode_tokens_per_s;
  report.prefill_tokens_per_s = r.prefill_tokens_per_s;
  const std::string id = r.id.to_text();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pods_.find(id);
  if (it != pods_.end() && it->second.registration.url != r.url) {
    return "pod " + id + " is live at " + it->second.registration.url +
           "; one identity serves one URL at a time, so it cannot also register " + r.url +
           " (it may once the first is silent for the hub's pod timeout)";
  }
  for (const ServedModel& m : r.models) report.models.push_back(hold_model(m.name));
  try {
    if (it == pods_.end()) {
      const PodRecord& record = records_[id];
      Pod pod;
      pod.id = router_.add(report, record.rtt_seconds, record.reputation);
      node_of_[pod.id] = id;
      pod.first_seen = now;
      it = pods_.emplace(id, std::move(pod)).first;
    } else {
      router_.update(it->second.id, report);
      release_models(it->second.registration);  // its last registration's
    }
  } catch (...) {
    release_models(r);
    throw;
  }
  it->second.registration = r;
  it->second.address = address;
  it->second.last_seen = now;
  return "";
}

std::vector<std::string> PodTable::expire(Clock::duration timeout, Clock::time_point now) {
  std::vector<std::string> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (now - it->second.last_seen > timeout) {
      router_.remove(it->second.id);
      node_of_.erase(it->second.id);
      release_models(it->second.registration);
      // Nothing to remember of a pod that served nothing and was never checked.
      const auto record = records_.find(it->first);
      if (record != records_.end() && record->second.requests == 0 && record->second.checked == 0 &&
          record->second.failed == 0) {
        records_.erase(record);
      }
      dropped.push_back(it->first);
      it = pods_.erase(it);
    } else {
      ++it;
    }
  }
  if (records_.size() > kMaxRecords) prune_records();
  return dropped;
}

void PodTable::prune_records() {
  // The records of pods not live, those that never failed first: forgetting a good record
  // costs its pod its standing; forgetting a bad one would wash it.
  for (const bool failed : {false, true}) {
    for (auto it = records_.begin(); it != records_.end() && records_.size() > kMaxRecords;) {
      if (!pods_.contains(it->first) && (it->second.failed > 0) == failed) {
        it = records_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

size_t PodTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pods_.size();
}

LivePod PodTable::snapshot(const std::string& id, const Pod& pod) const {
  LivePod out;
  out.id = id;
  out.router_id = pod.id;
  out.registration = pod.registration;
  out.address = pod.address;
  out.first_seen = pod.first_seen;
  out.last_seen = pod.last_seen;
  out.active = router_.active(pod.id);
  const auto record = records_.find(id);
  if (record != records_.end()) out.record = record->second;
  return out;
}

std::vector<LivePod> PodTable::live() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LivePod> out;
  out.reserve(pods_.size());
  for (const auto& [id, pod] : pods_) out.push_back(snapshot(id, pod));
  return out;
}

std::optional<LivePod> PodTable::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = pods_.find(id);
  if (it == pods_.end()) return std::nullopt;
  return snapshot(id, it->second);
}

int64_t PodTable::others_serving(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pod = pods_.find(id);
  if (pod == pods_.end()) return 0;
  int64_t fewest = INT64_MAX;
  for (const ServedModel& m : pod->second.registration.models) {
    const auto it = models_.find(m.name);
    const int64_t n =
        it == models_.end() ? 0 : static_cast<int64_t>(router_.serving(it->second.id));
    fewest = std::min(fewest, std::max<int64_t>(0, n - (router_.live(pod->second.id) ? 1 : 0)));
  }
  return fewest == INT64_MAX ? 0 : fewest;
}

std::optional<ModelId> PodTable::model(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = models_.find(name);
  if (it == models_.end()) return std::nullopt;
  return it->second.id;
}

size_t PodTable::serving(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = models_.find(model);
  return it == models_.end() ? 0 : router_.serving(it->second.id);
}

std::optional<ChosenPod> PodTable::choose(const std::string& model_name, int64_t prompt_tokens,
                                          int64_t max_tokens, std::span<const PodId> exclude,
                                          std::span<const std::string> wary) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto named = models_.find(model_name);
  if (named == models_.end()) return std::nullopt;
  const ModelId model = named->second.id;
  std::vector<PodId> avoid(exclude.begin(), exclude.end());
  for (const std::string& node : wary) {
    const auto live = pods_.find(node);
    if (live != pods_.end()) avoid.push_back(live->second.id);
  }
  std::optional<PodId> pod = router_.route(RouteRequest{model, prompt_tokens, max_tokens, avoid});
  if (!pod) pod = router_.route(RouteRequest{model, prompt_tokens, max_tokens, exclude});
  if (!pod) return std::nullopt;
  const auto it = node_of_.find(*pod);
  if (it == node_of_.end()) return std::nullopt;
  router_.started(*pod);
  const Pod& chosen = pods_.at(it->second);
  return ChosenPod{*pod, it->second, chosen.registration.url, chosen.address};
}

void PodTable::finished(const ChosenPod& chosen) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = node_of_.find(chosen.pod);
  if (it != node_of_.end() && it->second == chosen.node) router_.finished(chosen.pod);
}

PodRecord PodTable::record(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = records_.find(id);
  return it == records_.end() ? PodRecord{} : it->second;
}

void PodTable::update_record(const std::string& id, const std::function<void(PodRecord&)>& change) {
  std::lock_guard<std::mutex> lock(mutex_);
  PodRecord& record = records_[id];
  change(record);
  const auto live = pods_.find(id);
  if (live != pods_.end()) router_.set_reputation(live->second.id, record.reputation);
}

void PodTable::set_rtt(const std::string& id, double rtt_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto live = pods_.find(id);
  if (live == pods_.end()) return;  // it left while the hub measured
  PodRecord& record = records_[id];
  record.rtt_seconds = rtt_seconds;
  record.rtt_measured = true;
  router_.set_rtt(live->second.id, rtt_seconds);
}

void PodTable::count_served(const std::string& id, int64_t completion_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  PodRecord& record = records_[id];
  ++record.requests;
  record.tokens += completion_tokens;
}

std::vector<CheckerPod> PodTable::checkers(const std::string& model, const std::string& pod) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CheckerPod> out;
  for (const auto& [id, live] : pods_) {
    if (id == pod) continue;
    const auto record = records_.find(id);
    const double reputation = record == records_.end() ? kNewReputation : record->second.reputation;
    if (reputation < kMinReputation) continue;
    bool serves = false;
    for (const ServedModel& m : live.registration.models) serves = serves || m.name == model;
    if (serves) out.push_back({id, live.address, reputation});
  }
  return out;
}

std::vector<std::string> PodTable::good_pods() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [id, r] : records_) {
    if (r.failed == 0) out.push_back(id);
  }
  return out;
}

size_t PodTable::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_.size();
}

size_t PodTable::model_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return models_.size();
}

}  // namespace herd::hub
