// The hub's routing core (issue 19): which pod gets a whole request. Pods report the models
// they serve, how many sequences they run at once and their measured speed; the hub
// measures its round trip to each and counts the requests it has sent each and not yet seen
// finish. A request goes to the pod whose predicted completion, weighed by reputation, is
// earliest:
//
//   completion = rtt + wait + prompt_tokens / prefill_tok_s + max_tokens / decode_tok_s
//   wait       = 0 while the pod has a free slot (active < slots), else the time until one
//                frees: (active - slots + 1) x (a typical request's seconds) / slots
//   cost       = completion / reputation   (reputation in (0, 1]; below kMinReputation a
//                                            pod gets no requests)
//
// Speed: the pods of each model are kept ordered by the cost of a typical request (kTypical*
// tokens), updated whenever a pod's state changes (O(log n) per model it serves); a request's
// own cost is computed for the first kCandidates pods of that order that it does not exclude,
// and the cheapest wins. A decision is O(log n + kCandidates) however many pods there are
// (bench/hub_sim.cpp measures it with 100,000 pods and churn; docs/network.md).
//
// Not thread-safe: the hub serialises calls (one router per hub replica).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace herd::hub {

using PodId = uint32_t;    // the router's handle for a pod; reused after remove()
using ModelId = uint32_t;  // dense: the hub numbers the model names it has seen

// What a pod says of itself when it registers and in each heartbeat.
struct PodReport {
  std::vector<ModelId> models;      // at most kMaxModelsPerPod, no repeats
  int32_t slots = 1;                // sequences it runs at once (1..kMaxSlots)
  double decode_tokens_per_s = 0;   // per sequence, measured by the pod (> 0)
  double prefill_tokens_per_s = 0;  // measured by the pod (> 0)
};

struct RouteRequest {
  ModelId model = 0;
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
  std::span<const PodId> exclude{};  // pods that failed this request already
};

inline constexpr size_t kMaxModelsPerPod = 64;
inline constexpr int32_t kMaxSlots = 4096;
inline constexpr double kMinReputation = 0.05;
inline constexpr int64_t kTypicalPromptTokens = 512;
inline constexpr int64_t kTypicalMaxTokens = 256;
inline constexpr size_t kCandidates = 16;

class Router {
 public:
  // Throws herd::Error("hub", ...) naming the field for a report out of range.
  PodId add(const PodReport& report, double rtt_seconds, double reputation = 1.0);
  void update(PodId pod, const PodReport& report);
  void set_rtt(PodId pod, double rtt_seconds);
  void set_reputation(PodId pod, double reputation);  // clamped to [0, 1]
  // A pod that left or failed: it gets no more requests; its id may be given again.
  void remove(PodId pod);

  // The pod to send the request to, or nullopt when no live pod serves the model (or all
  // that do are excluded or distrusted). Changes nothing: call started() when sending.
  std::optional<PodId> route(const RouteRequest& request) const;
  void started(PodId pod);   // a request was sent to the pod
  void finished(PodId pod);  // one ended there (answered or failed)

  // The predicted seconds of a request on a pod (the completion above, not weighed).
  double predicted_seconds(PodId pod, int64_t prompt_tokens, int64_t max_tokens) const;
  bool live(PodId pod) const;
  // The live, trusted pods that serve the model (those route() may choose).
  size_t serving(ModelId model) const {
    return model < by_model_.size() ? by_model_[model].size() : 0;
  }
  int32_t active(PodId pod) const;
  size_t size() const { return live_pods_; }
  // What the router holds, in bytes: its tables and index entries (estimated per entry).
  size_t memory_bytes() const;

 private:
  struct Pod {
    PodReport report;
    double rtt_seconds = 0;
    double reputation = 1;
    int32_t active = 0;
    bool live = false;
    double indexed_cost = 0;  // its key in by_model_ while indexed
    bool indexed = false;
  };
  using Index = std::set<std::pair<double, PodId>>;  // (typical cost, pod), cheapest first

  Pod& pod_at(PodId pod);
  const Pod& pod_at(PodId pod) const;
  double cost(PodId pod, int64_t prompt_tokens, int64_t max_tokens) const;
  void unindex(PodId pod);
  void reindex(PodId pod);

  std::vector<Pod> pods_;
  std::vector<PodId> free_ids_;
  std::vector<Index> by_model_;  // [model]
  size_t live_pods_ = 0;
  size_t index_entries_ = 0;
};

}  // namespace herd::hub
