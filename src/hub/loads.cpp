#include "hub/loads.h"

#include <httplib.h>

#include "hub/answer_limits.h"

namespace herd::hub {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Loads::pod_registered(const Registration& r) {
  std::vector<std::string> served;
  for (const ServedModel& m : r.models) served.push_back(m.name);
  std::lock_guard<std::mutex> lock(mutex_);
  return demand_.pod_registered(r.id.to_text(), r.loadable, served);
}

void Loads::pod_dropped(const std::string& pod) {
  std::lock_guard<std::mutex> lock(mutex_);
  demand_.pod_dropped(pod);
}

std::vector<PodId> Loads::loading_pods() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return demand_.loading_pods();
}

std::optional<std::string> Loads::answer_unserved(const std::string& model) {
  const auto now = Clock::now();
  const int after = demand_.options().load_after;
  if (after <= 0 || model.empty() || model.size() > 256) return std::nullopt;
  std::optional<LoadOrder> order;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = demand_.record(model, now);
    if (const auto load = demand_.load_of(model, now)) {
      message = "model '" + model + "' is being loaded on a pod (for " +
                std::to_string(
                    static_cast<int>(std::chrono::duration<double>(now - load->started).count())) +
                " s): try again shortly";
    } else {
      std::vector<LoadCandidate> candidates;
      std::map<std::string, LivePod> live;
      for (const std::string& pod_id : demand_.pods_that_can_load(model)) {
        const auto p = pods_.find(pod_id);
        if (!p || demand_.refused_recently(model, pod_id, now) ||
            !demand_.loading_on(pod_id).empty() || p->record.reputation < kMinReputation) {
          continue;
        }
        candidates.push_back(
            {pod_id, p->active, p->registration.slots, pods_.others_serving(pod_id)});
        live.emplace(pod_id, std::move(*p));
      }
      if (candidates.empty()) return std::nullopt;
      if (n < after) {
        message = "model '" + model + "' is not loaded on any pod now; " +
                  std::to_string(candidates.size()) + " can load it, which one does after " +
                  std::to_string(after) + " requests within " +
                  std::to_string(demand_.options().window.count()) + " s (" + std::to_string(n) +
                  " so far): try again shortly";
      } else {
        const LoadCandidate& chosen = candidates[*choose_loader(candidates)];
        const LivePod& pod = live.at(chosen.pod);
        demand_.start(model, chosen.pod, pod.router_id, now);
        order = LoadOrder{chosen.pod, pod.address, demand_.token(chosen.pod)};
        message = "model '" + model + "' is being loaded on a pod (" + pod.registration.name +
                  "): try again shortly";
      }
    }
  }
  if (order) {
    if (const std::string problem = send_load(model, *order); !problem.empty()) {
      message = "model '" + model + "' is not loaded on any pod now: the pod asked to load it " +
                problem + "; another will be asked";
    }
  }
  return message;
}

// POST /api/load {"model": model} on the pod, with its control token: "" when it took the
// load (202), else what went wrong (and the load ends: demand.failed).
std::string Loads::send_load(const std::string& model, const LoadOrder& order) {
  std::string problem;
  const PodAnswer r = clients_.post(order.address, "/api/load", json{{"model", model}}.dump(),
                                    kSmallAnswer, "Bearer " + order.token, 2);
  if (!r.answered()) {
    problem = r.failure.substr(r.failure.starts_with("it ") ? 3 : 0);
  } else if (r.status != 202) {
    problem = "answered " + std::to_string(r.status);
  }
  if (!problem.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    demand_.failed(model, order.pod, Clock::now());
  }
  return problem;
}

void Loads::add_pod_loads(json& pod, const std::string& pod_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  pod["loadable"] = demand_.loadable(pod_id);
  const std::string loading = demand_.loading_on(pod_id);
  pod["loading"] = loading.empty() ? json(nullptr) : json(loading);
}

void Loads::add_loadable_models(json& data, const std::map<std::string, int>& served,
                                const std::vector<std::string>& live) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, int> loadable;  // name -> pods that can load it
  for (const std::string& id : live) {
    for (const std::string& m : demand_.loadable(id)) {
      if (!served.contains(m)) ++loadable[m];
    }
  }
  for (const auto& [name, n] : loadable) {
    const bool loading = demand_.loading(name);
    data.push_back({{"id", name},
                    {"object", "model"},
                    {"owned_by", "herd-network"},
                    {"pods", 0},
                    {"loadable_pods", n},
                    {"state", loading ? "loading" : "loadable"}});
  }
}

json Loads::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return demand_.view(Clock::now());
}

}  // namespace herd::hub
