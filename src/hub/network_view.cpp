#include "hub/network_view.h"

#include <chrono>
#include <map>

#include "util/error.h"

namespace herd::hub {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void NetworkView::request_started() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++totals_.requests;
  ++totals_.active;
}

void NetworkView::request_served(const Served& s, const std::string& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  --totals_.active;
  totals_.tokens += s.completion_tokens;
  totals_.prompt_tokens += s.prompt_tokens;
  if (status == "unpaid") ++totals_.unpaid;
  recent_.push_back({{"at_ms", unix_ms()},
                     {"model", s.model},
                     {"pod", s.pod_id},
                     {"pod_name", s.pod_name},
                     {"prompt_tokens", s.prompt_tokens},
                     {"completion_tokens", s.completion_tokens},
                     {"seconds", s.seconds},
                     {"status", status}});
  while (recent_.size() > kRecent) recent_.pop_front();
}

void NetworkView::request_failed(const std::string& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  --totals_.active;
  ++totals_.failed;
  recent_.push_back({{"at_ms", unix_ms()}, {"model", model}, {"status", "failed"}});
  while (recent_.size() > kRecent) recent_.pop_front();
}

json NetworkView::model_list() const {
  std::map<std::string, int> served;  // name -> live pods
  std::vector<std::string> live;
  for (const LivePod& pod : pods_.live()) {
    for (const ServedModel& m : pod.registration.models) ++served[m.name];
    live.push_back(pod.id);
  }
  json data = json::array();
  for (const auto& [name, n] : served) {
    data.push_back({{"id", name}, {"object", "model"}, {"owned_by", "herd-network"}, {"pods", n}});
  }
  loads_.add_loadable_models(data, served, live);
  return {{"object", "list"}, {"data", data}};
}

json NetworkView::network() const {
  json out = {{"pods", json::array()}, {"recent", json::array()}};
  const auto now = Clock::now();
  for (const LivePod& pod : pods_.live()) {
    const Registration& r = pod.registration;
    const PodRecord& rec = pod.record;
    json models = json::array();
    for (const ServedModel& m : r.models) models.push_back({{"name", m.name}, {"n_ctx", m.n_ctx}});
    json view = {
        {"id", pod.id},
        {"name", r.name},
        {"url", r.url},
        {"models", models},
        {"slots", r.slots},
        {"active", pod.active},
        {"decode_tokens_per_s", r.decode_tokens_per_s},
        {"prefill_tokens_per_s", r.prefill_tokens_per_s},
        {"measured_tokens_per_s", rec.speed.tokens_per_s},
        {"routed_decode_tokens_per_s", rec.routed_decode_tokens_per_s},
        {"memory_bytes", r.memory_bytes},
        {"uptime_seconds", std::chrono::duration<double>(now - pod.first_seen).count()},
        {"last_seen_seconds", std::chrono::duration<double>(now - pod.last_seen).count()},
        // Only a herd /health answer's: the view says nothing of a port that is not a pod's.
        {"rtt_ms", rec.rtt_measured ? json(rec.rtt_seconds * 1e3) : json(nullptr)},
        {"reputation", rec.reputation},
        {"flagged", rec.reputation < kMinReputation},
        {"seed", rec.seed},
        {"may_check", rec.may_check},
        {"requests", rec.requests},
        {"tokens_served", rec.tokens},
        {"checked", rec.checked},
        {"verified", rec.passed},
        {"failed_verifications", rec.failed},
        {"last_failure", rec.last_failure}};
    loads_.add_pod_loads(view, pod.id);
    // Balances: the ledger has its own lock.
    try {
      view["credits_earned"] = credits_.balance(Credits::pod_account(pod.id));
      view["credits_pending"] = credits_.balance(Credits::pending_account(pod.id));
    } catch (const Error&) {
      view["credits_earned"] = view["credits_pending"] = nullptr;
    }
    out["pods"].push_back(std::move(view));
  }
  out["loads"] = loads_.view();
  json requests;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const json& r : recent_) out["recent"].push_back(r);
    requests = {{"total", totals_.requests},
                {"active", totals_.active},
                {"failed", totals_.failed},
                {"tokens", totals_.tokens},
                {"prompt_tokens", totals_.prompt_tokens},
                {"unpaid", totals_.unpaid}};
  }
  out["hub"] = {{"replica", replica_},
                {"requests", requests},
                {"verification", verifier_.stats()},
                {"prices",
                 {{"prompt_token", prices_.prompt_token},
                  {"completion_token", prices_.completion_token},
                  {"fee_percent", prices_.fee_percent}}}};
  return out;
}

}  // namespace herd::hub
