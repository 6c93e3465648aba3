#include "hub/pod_table.h"

#include <algorithm>

#include "util/error.h"

namespace herd::hub {

PodCounts PodRecord::counts() const {
  PodCounts c;
  c.requests = requests;
  c.tokens = tokens;
  c.checked = checked;
  c.passed = passed;
  c.failed = failed;
  c.qualified_passes = qualified_passes;
  c.overruled = overruled;
  c.last_failure = last_failure;
  return c;
}

namespace {

PodCounts minus(const PodCounts& after, const PodCounts& before) {
  PodCounts d;
  d.requests = after.requests - before.requests;
  d.tokens = after.tokens - before.tokens;
  d.checked = after.checked - before.checked;
  d.passed = after.passed - before.passed;
  d.failed = after.failed - before.failed;
  d.qualified_passes = after.qualified_passes - before.qualified_passes;
  d.overruled = after.overruled - before.overruled;
  if (after.last_failure != before.last_failure) d.last_failure = after.last_failure;
  return d;
}

// The speeds the router is told of a pod whose report names its models (speed.h), the
// fastest measure of each model's pods kept up to date with this pod's.
void routed_into(PodReport& report, const Registration& r, PodRecord& record,
                 std::map<ModelId, double>& fastest_of) {
  double fastest = 0;
  for (const ModelId m : report.models) {
    double& best = fastest_of[m];
    if (record.speed.samples > 0) best = std::max(best, record.speed.tokens_per_s);
    fastest = std::max(fastest, best);
  }
  const RoutedSpeed speed =
      routed_speed(record.speed, r.decode_tokens_per_s, r.prefill_tokens_per_s, fastest);
  report.decode_tokens_per_s = speed.decode_tokens_per_s;
  report.prefill_tokens_per_s = speed.prefill_tokens_per_s;
  record.routed_decode_tokens_per_s = speed.decode_tokens_per_s;
}

}  // namespace

PodTable::PodTable(std::vector<std::string> seeds, PodRecords* store)
    : seeds_(seeds.begin(), seeds.end()), store_(store) {}

void PodTable::derive(PodRecord& record) const {
  const PodCounts c = record.counts();
  record.reputation = reputation_of(c, record.seed);
  record.may_check = may_check(c, record.seed);
}

PodReport PodTable::report_of(const Pod& pod, PodRecord& record) {
  PodReport report;
  report.slots = pod.registration.slots;
  for (const ServedModel& m : pod.registration.models) {
    report.models.push_back(models_.at(m.name).id);  // held while the pod is live
  }
  routed_into(report, pod.registration, record, fastest_);
  return report;
}

void PodTable::store(const std::string& id, const PodCounts& delta) {
  if (store_ == nullptr || delta == PodCounts{}) return;
  try {
    store_->add(id, delta);
  } catch (const Error&) {
  }
}

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
  fastest_.erase(it->second.id);
  models_.erase(it);
}

void PodTable::release_models(const Registration& r) {
  for (const ServedModel& m : r.models) release_model(m.name);
}

std::string PodTable::registered(const Registration& r, const PodAddress& address,
                                 Clock::time_point now) {
  PodReport report;
  report.slots = r.slots;
  const std::string id = r.id.to_text();
  // The stored record is the truth shared with other replicas and kept across restarts.
  std::optional<PodCounts> stored;
  if (store_ != nullptr) {
    try {
      stored = store_->load(id);
    } catch (const Error&) {
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pods_.find(id);
  if (it != pods_.end() && it->second.registration.url != r.url) {
    return "pod " + id + " is live at " + it->second.registration.url +
           "; one identity serves one URL at a time, so it cannot also register " + r.url +
           " (it may once the first is silent for the hub's pod timeout)";
  }
  PodRecord& record = records_[id];
  record.seed = seeds_.contains(id);
  if (stored) {
    // Counts only grow, and every change here was added to the store: the larger of each is
    // the newer (the store's: another replica's changes; this one's: a change made while
    // the store was read).
    if (stored->failed > record.failed) record.last_failure = stored->last_failure;
    record.requests = std::max(record.requests, stored->requests);
    record.tokens = std::max(record.tokens, stored->tokens);
    record.checked = std::max(record.checked, stored->checked);
    record.passed = std::max(record.passed, stored->passed);
    record.failed = std::max(record.failed, stored->failed);
    record.qualified_passes = std::max(record.qualified_passes, stored->qualified_passes);
    record.overruled = std::max(record.overruled, stored->overruled);
  }
  derive(record);
  for (const ServedModel& m : r.models) report.models.push_back(hold_model(m.name));
  routed_into(report, r, record, fastest_);
  try {
    if (it == pods_.end()) {
      Pod pod;
      pod.id = router_.add(report, record.rtt_seconds, record.reputation);
      node_of_[pod.id] = id;
      pod.first_seen = now;
      it = pods_.emplace(id, std::move(pod)).first;
    } else {
      router_.update(it->second.id, report);
      router_.set_reputation(it->second.id, record.reputation);
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
  PodCounts delta;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    PodRecord& record = records_[id];
    record.seed = seeds_.contains(id);
    const PodCounts before = record.counts();
    change(record);
    delta = minus(record.counts(), before);
    if (delta != PodCounts{}) derive(record);
    const auto live = pods_.find(id);
    if (live != pods_.end()) router_.set_reputation(live->second.id, record.reputation);
  }
  store(id, delta);
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

void PodTable::count_served(const std::string& id, int64_t completion_tokens, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    PodRecord& record = records_[id];
    ++record.requests;
    record.tokens += completion_tokens;
    record.speed.observe(completion_tokens, seconds);
    const auto live = pods_.find(id);
    if (live != pods_.end()) router_.update(live->second.id, report_of(live->second, record));
  }
  PodCounts delta;
  delta.requests = 1;
  delta.tokens = completion_tokens;
  store(id, delta);
}

std::vector<CheckerPod> PodTable::checkers(const std::string& model, const std::string& pod) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CheckerPod> out;
  for (const auto& [id, live] : pods_) {
    if (id == pod) continue;
    const auto record = records_.find(id);
    if (record == records_.end() || !record->second.may_check) continue;
    bool serves = false;
    for (const ServedModel& m : live.registration.models) serves = serves || m.name == model;
    if (serves) out.push_back({id, live.address, record->second.reputation});
  }
  return out;
}

std::vector<std::string> PodTable::good_pods() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [id, r] : records_) {
    if (r.trusted()) out.push_back(id);
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
