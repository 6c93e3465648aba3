// Demand for models no pod serves, and the loads it starts (issue: "a pod can be asked to
// load a model that many clients want"). A pod lists the models it could load (the
// registration's "loadable", `herd serve --models-dir`); the hub counts the requests for a
// model no live pod serves within a sliding window, and once they reach `load_after` it asks
// one pod that can (POST /api/load on the pod, with the control token the hub gave that pod
// in its registration's answer). Meanwhile clients get 503 and Retry-After; once the pod
// registers with the model, requests go to it as to any pod.
//
//   request for B, no live pod serves B
//     -> record(B): n requests within the window
//     -> a load of B in flight?      503 "being loaded on a pod"
//     -> no pod lists B as loadable? 404, as for any unknown model
//     -> n < load_after?             503 "n of load_after requests ...", Retry-After
//     -> else choose_loader(pods listing B) -> start() -> POST /api/load -> 503
//
// At most one load per model is in flight; one not seen done (the pod registering with the
// model) within load_timeout is given up, and a pod that refused or failed a load of a model
// is not asked for it again within the window.
//
// Not thread-safe: the hub calls it under its lock, as it calls the router.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hub/router.h"

namespace herd::hub {

struct DemandOptions {
  int load_after = 3;  // requests within `window` that start a load (0: pods are never asked)
  std::chrono::seconds window{60};
  std::chrono::seconds load_timeout{600};  // a load not done by then is given up
};

// Models whose demand is tracked at once (client-chosen names: bounded); more are not
// counted until some leave the window.
inline constexpr size_t kMaxTrackedModels = 4096;
// What the hub tells a client to wait before asking again for a model being loaded.
inline constexpr int kLoadRetryAfterSeconds = 5;

// A live pod that lists the model as loadable, as the hub sees it now.
struct LoadCandidate {
  std::string pod;             // node id text
  int32_t active = 0;          // requests the hub sent it that have not finished
  int32_t slots = 1;           // sequences it runs at once
  int64_t others_serving = 0;  // the fewest other live pods serving one of its models
};

// The candidate to ask: an idle pod first (nothing of its own is interrupted); then one whose
// models other pods also serve (nothing goes unserved); then the least busy (active / slots);
// ties by node id. nullopt when there is none.
std::optional<size_t> choose_loader(std::span<const LoadCandidate> candidates);

class Demand {
 public:
  using Clock = std::chrono::steady_clock;

  struct Load {
    std::string model, pod;  // the pod's node id text
    PodId router_id = 0;
    Clock::time_point started;
  };

  explicit Demand(DemandOptions options) : options_(options) {}
  const DemandOptions& options() const { return options_; }

  // ---- pods ----

  // A pod registered: what it could load. Returns its control token, made at the first
  // registration (32 random bytes, URL-safe base64) and kept until pod_dropped(). Ends a
  // load the pod was asked for once it serves that model.
  std::string pod_registered(const std::string& pod, std::vector<std::string> loadable,
                             const std::vector<std::string>& served);
  // A pod left: its token, its loadable models and any load it was asked for are forgotten.
  void pod_dropped(const std::string& pod);
  // The pod's control token ("" for a pod not registered).
  std::string token(const std::string& pod) const;
  const std::vector<std::string>& loadable(const std::string& pod) const;
  // The live pods that list `model` as loadable.
  std::vector<std::string> pods_that_can_load(const std::string& model) const;

  // ---- demand ----

  // A request for a model no live pod serves: the requests for it within the window, this
  // one included (0 when the model cannot be tracked: kMaxTrackedModels).
  int record(const std::string& model, Clock::time_point now);
  // The requests within the window, without recording one.
  int count(const std::string& model, Clock::time_point now) const;

  // ---- loads ----

  // The load of `model` in flight, after giving up those past load_timeout.
  std::optional<Load> load_of(const std::string& model, Clock::time_point now);
  // Whether a load of `model` is in flight (not giving up any).
  bool loading(const std::string& model) const { return loads_.contains(model); }
  // The model a pod is loading, or "".
  std::string loading_on(const std::string& pod) const;
  // The router ids of the pods loading a model (routed nothing meanwhile: they answer 503).
  std::vector<PodId> loading_pods() const;
  // REQUIRES: no load of `model` in flight.
  void start(const std::string& model, const std::string& pod, PodId router_id,
             Clock::time_point now);
  // The pod refused the load or did not answer: the load ends, and the pod is not asked for
  // the model again within the window.
  void failed(const std::string& model, const std::string& pod, Clock::time_point now);
  bool refused_recently(const std::string& model, const std::string& pod,
                        Clock::time_point now) const;

  // For GET /api/network: {"loads": [{model, pod, seconds}], "demand": [{model, requests}],
  // "load_after": n, "window_seconds": s}.
  nlohmann::json view(Clock::time_point now) const;

 private:
  struct PodEntry {
    std::string token;
    std::vector<std::string> loadable;
  };
  void prune(Clock::time_point now);

  DemandOptions options_;
  std::map<std::string, PodEntry> pods_;                           // by node id text
  std::map<std::string, std::set<std::string>> loadable_by_;       // model -> pods
  std::map<std::string, std::deque<Clock::time_point>> requests_;  // model -> times, oldest first
  std::map<std::string, Load> loads_;                              // by model
  std::map<std::pair<std::string, std::string>, Clock::time_point> refused_;  // (model, pod)
};

}  // namespace herd::hub
