// The hub's pod table (issue 28, "the hub's state"): the live pods, their registrations and
// router handles, the model names' ids, the router (router.h) they feed, and every pod's
// record (reputation, counts), which stays after the pod leaves so that a pod cannot wash
// its record by registering again.
//
// Thread-safe: one lock of its own guards all of it. It is the innermost lock of the hub:
// the other rooms (verifier.h, loads.h, network_view.h) may call it while holding theirs;
// it calls nothing outside itself while holding its own (update_record's function runs
// under it and must not call out either).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hub/checks.h"
#include "hub/registration.h"
#include "hub/router.h"

namespace herd::hub {

// What the hub knows of a pod beyond its registration, by node id; kept after it leaves.
struct PodRecord {
  double reputation = kNewReputation;
  double rtt_seconds = 0;
  int64_t requests = 0, tokens = 0;
  int64_t checked = 0, passed = 0, failed = 0;
  std::string last_failure;
};

// A live pod as the table saw it at one moment (a copy: it does not change afterwards).
struct LivePod {
  using Clock = std::chrono::steady_clock;
  std::string id;  // node id text
  PodId router_id = 0;
  Registration registration;
  Clock::time_point first_seen, last_seen;
  int32_t active = 0;  // requests sent it and not finished
  PodRecord record;
};

// A pod chosen for a request: its router id (reused once it leaves), node id and URL.
struct ChosenPod {
  PodId pod = 0;
  std::string node, url;
};

// A pod that may check another's work (PodTable::checkers).
struct CheckerPod {
  std::string id, url;
  double reputation = 0;
};

class PodTable {
 public:
  using Clock = std::chrono::steady_clock;

  // ---- the live pods ----

  // A pod's registration (its first, or a heartbeat): added to the router with its record's
  // round trip and reputation, or its figures updated. Throws herd::Error("hub", ...) for
  // figures the router refuses.
  void registered(const Registration& r, Clock::time_point now);
  // Drops the pods not heard from within `timeout`; returns their node ids.
  std::vector<std::string> expire(Clock::duration timeout, Clock::time_point now);
  size_t size() const;
  std::vector<LivePod> live() const;  // ordered by node id
  std::optional<LivePod> find(const std::string& id) const;
  // The fewest other live pods that serve one of the pod's models (0 for a pod not live).
  int64_t others_serving(const std::string& id) const;

  // ---- routing ----

  // The id of a model name, numbered on first sight (a pod's registration names it);
  // nullopt for a name no pod ever served.
  std::optional<ModelId> model(const std::string& name) const;
  size_t serving(ModelId model) const;
  // A pod for the request that none of `exclude` is, marked started (Router::started);
  // the pods of `wary` (node ids) only when no other can take it. nullopt when none.
  std::optional<ChosenPod> choose(ModelId model, int64_t prompt_tokens, int64_t max_tokens,
                                  std::span<const PodId> exclude,
                                  std::span<const std::string> wary);
  // The request on `chosen` ended: it counts no more (unless the pod left meanwhile and its
  // router id went to another).
  void finished(const ChosenPod& chosen);

  // ---- records ----

  // A copy of the pod's record (a new identity's for one never seen).
  PodRecord record(const std::string& id) const;
  // Runs `change` on the pod's record under the lock, then gives the router its reputation.
  void update_record(const std::string& id, const std::function<void(PodRecord&)>& change);
  void set_rtt(const std::string& id, double rtt_seconds);
  // A request the pod served: its counts.
  void count_served(const std::string& id, int64_t completion_tokens);
  // Live pods serving `model`, other than `pod`, whose reputation the router trusts.
  std::vector<CheckerPod> checkers(const std::string& model, const std::string& pod) const;
  // The pods, live or not, that never failed a check (their pending credits are paid).
  std::vector<std::string> good_pods() const;

 private:
  struct Pod {
    PodId id = 0;
    Registration registration;
    Clock::time_point first_seen, last_seen;
  };
  LivePod snapshot(const std::string& id, const Pod& pod) const;  // under the lock

  mutable std::mutex mutex_;  // guards what follows
  Router router_;
  std::map<std::string, Pod> pods_;                 // by node id text: the live ones
  std::map<std::string, PodRecord> records_;        // by node id text: every pod ever seen
  std::unordered_map<PodId, std::string> node_of_;  // the live pods' node ids
  std::map<std::string, ModelId> models_;           // model name -> the router's id
};

}  // namespace herd::hub
