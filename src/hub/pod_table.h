// The hub's pod table (issue 28, "the hub's state"): the live pods, their registrations and
// router handles, the model names' ids, the router (router.h) they feed, and every pod's
// record (reputation, counts), which stays after the pod leaves so that a pod cannot wash
// its record by registering again.
//
// Bounded (issue 28: anyone may make identities and name models): a model name is known
// while a live pod serves it (its id is given to another name once none does); a record
// with nothing in it (no request served, no check) goes with its pod; of the others, at most
// kMaxRecords are kept, those of pods that failed a check last of all. A live pod's identity
// serves one URL at a time.
//
// Thread-safe: one lock of its own guards all of it. It is the innermost lock of the hub:
// the other rooms (verifier.h, loads.h, network_view.h) may call it while holding theirs;
// it calls nothing outside itself while holding its own (update_record's function runs
// under it and must not call out either).
//
// Issue 28's rules live here where they touch a pod's standing: the seeds the operator
// trusts, whether a pod may check (checks.h: may_check), its reputation as a function of its
// counts, the speed the router is told (speed.h: measured, the claim capped), and the
// counts' copy in the database (pod_records.h: read at each registration, every change
// added; database calls are made outside the table's lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hub/checks.h"
#include "hub/pod_address.h"
#include "hub/pod_records.h"
#include "hub/registration.h"
#include "hub/router.h"
#include "hub/speed.h"

namespace herd::hub {

// Records of pods not live kept at most (each some hundred bytes).
inline constexpr size_t kMaxRecords = 100'000;

// What the hub knows of a pod beyond its registration, by node id; kept after it leaves.
struct PodRecord {
  // reputation_of(counts) and may_check(counts): kept so by the table after every change.
  double reputation = kNewReputation;
  bool may_check = false;
  bool seed = false;  // named by the operator (--trust-pod)
  double rtt_seconds = 0;
  bool rtt_measured = false;  // the pod answered a herd GET /health (set_rtt)
  int64_t requests = 0, tokens = 0;
  int64_t checked = 0, passed = 0, failed = 0;
  int64_t qualified_passes = 0, overruled = 0;
  std::string last_failure;
  MeasuredSpeed speed;  // this replica's measure of its answers
  double routed_decode_tokens_per_s = 0;

  // Whether its answers go to clients unchecked (a sample is checked after): a seed, or a
  // pod that passed kTrustedPasses checks and never failed one.
  bool trusted() const { return failed == 0 && (seed || passed >= kTrustedPasses); }
  PodCounts counts() const;
};

// A live pod as the table saw it at one moment (a copy: it does not change afterwards).
struct LivePod {
  using Clock = std::chrono::steady_clock;
  std::string id;  // node id text
  PodId router_id = 0;
  Registration registration;
  PodAddress address;  // where the hub connects (pod_address.h)
  Clock::time_point first_seen, last_seen;
  int32_t active = 0;  // requests sent it and not finished
  PodRecord record;
};

// A pod chosen for a request: its router id (reused once it leaves), node id and URL.
struct ChosenPod {
  PodId pod = 0;
  std::string node, url;
  PodAddress address;
};

// A pod that may check another's work (PodTable::checkers).
struct CheckerPod {
  std::string id;
  PodAddress address;
  double reputation = 0;
};

class PodTable {
 public:
  using Clock = std::chrono::steady_clock;

  // `seeds`: node ids the operator trusts as checkers from the start. `store`: where the
  // records are kept (nullptr: in memory only); REQUIRES: it outlives the table.
  explicit PodTable(std::vector<std::string> seeds = {}, PodRecords* store = nullptr);

  // ---- the live pods ----

  // A pod's registration (its first, or a heartbeat) at `address` (its URL's, resolved):
  // added to the router with its record's round trip and reputation, or its figures updated.
  // Returns "" when registered, else why not: the identity is live at another URL (the
  // message names both). Throws herd::Error("hub", ...) for figures the router refuses.
  std::string registered(const Registration& r, const PodAddress& address, Clock::time_point now);
  // Drops the pods not heard from within `timeout` (and their records with nothing in
  // them); returns their node ids.
  std::vector<std::string> expire(Clock::duration timeout, Clock::time_point now);
  size_t size() const;
  std::vector<LivePod> live() const;  // ordered by node id
  std::optional<LivePod> find(const std::string& id) const;
  // The fewest other live pods that serve one of the pod's models (0 for a pod not live).
  int64_t others_serving(const std::string& id) const;

  // ---- routing ----

  // The id of a model name a live pod serves (registered or updated under the lock; it may
  // go to another name once none does); nullopt for a name no live pod serves.
  std::optional<ModelId> model(const std::string& name) const;
  // The live, trusted pods that serve the model (Router::serving).
  size_t serving(const std::string& model) const;
  // A pod for the request that none of `exclude` is, marked started (Router::started);
  // the pods of `wary` (node ids) only when no other can take it. nullopt when none.
  std::optional<ChosenPod> choose(const std::string& model, int64_t prompt_tokens,
                                  int64_t max_tokens, std::span<const PodId> exclude,
                                  std::span<const std::string> wary);
  // The request on `chosen` ended: it counts no more (unless the pod left meanwhile and its
  // router id went to another).
  void finished(const ChosenPod& chosen);

  // ---- records ----

  // A copy of the pod's record (a new identity's for one never seen).
  PodRecord record(const std::string& id) const;
  // Runs `change` on the pod's record under the lock, then gives the router its reputation.
  void update_record(const std::string& id, const std::function<void(PodRecord&)>& change);
  // The round trip the hub measured to a pod that answered a herd GET /health.
  void set_rtt(const std::string& id, double rtt_seconds);
  // A request the pod served to a client: its counts, and its speed measured (`seconds`
  // from sending the request to the answer's end).
  void count_served(const std::string& id, int64_t completion_tokens, double seconds);
  // Live pods serving `model`, other than `pod`, that may check (checks.h: may_check).
  std::vector<CheckerPod> checkers(const std::string& model, const std::string& pod) const;
  // The pods, live or not, whose pending credits are paid: trusted (PodRecord::trusted).
  std::vector<std::string> good_pods() const;

  // What the table holds (tests of its bounds): records, and model names known.
  size_t records() const;
  size_t model_names() const;

 private:
  struct Pod {
    PodId id = 0;
    Registration registration;
    PodAddress address;
    Clock::time_point first_seen, last_seen;
  };
  struct ModelName {
    ModelId id = 0;
    int64_t pods = 0;  // live pods whose registration names it
  };
  // Under the lock:
  LivePod snapshot(const std::string& id, const Pod& pod) const;
  ModelId hold_model(const std::string& name);  // one more pod names it
  void release_model(const std::string& name);  // one fewer; forgotten at none
  void release_models(const Registration& r);
  void prune_records();
  // The router's view of a live pod: its claims, the speed capped (speed.h).
  PodReport report_of(const Pod& pod, PodRecord& record);
  // A record's derived fields from its counts.
  void derive(PodRecord& record) const;

  // Adds `delta` to the pod's stored record (outside the lock); database errors are
  // dropped (the record in memory stands, and the next registration reads the store again).
  void store(const std::string& id, const PodCounts& delta);

  const std::set<std::string> seeds_;
  PodRecords* const store_;

  mutable std::mutex mutex_;  // guards what follows
  Router router_;
  std::map<std::string, Pod> pods_;                 // by node id text: the live ones
  std::map<std::string, PodRecord> records_;        // by node id text: every pod ever seen
  std::unordered_map<PodId, std::string> node_of_;  // the live pods' node ids
  std::map<std::string, ModelName> models_;         // the names live pods serve
  std::vector<ModelId> free_model_ids_;             // of names no live pod serves now
  std::map<ModelId, double> fastest_;  // the fastest measure of a live model's pods, so far
};

}  // namespace herd::hub
