// The hub's public view (issue 28, "the hub's state"): GET /api/network (every live pod,
// its figures and record, the requests flowing, the loads, the checks, the hub's totals and
// prices) and GET /v1/models. It keeps the traffic it shows (the request totals and the
// last kRecent requests); the rest it reads from the other rooms when asked.
//
// Thread-safe: its own lock guards the traffic; it reads the other rooms outside it (each
// takes its own lock), so a view is a set of snapshots taken one after another, not one
// instant.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "hub/credits.h"
#include "hub/loads.h"
#include "hub/pod_table.h"
#include "hub/verifier.h"

namespace herd::hub {

inline constexpr size_t kRecent = 50;

class NetworkView {
 public:
  // REQUIRES: the rooms and `credits` outlive the view. `replica` names this hub (the
  // prefix of its request ids).
  NetworkView(Prices prices, std::string replica, const PodTable& pods, const Verifier& verifier,
              const Loads& loads, Credits& credits)
      : prices_(prices),
        replica_(std::move(replica)),
        pods_(pods),
        verifier_(verifier),
        loads_(loads),
        credits_(credits) {}

  // ---- the traffic ----
  void request_started();
  // A request answered whole; `status` "ok" or "unpaid".
  void request_served(const Served& s, const std::string& status);
  // A request no pod answered, or one a pod refused.
  void request_failed(const std::string& model);

  // ---- the views ----
  nlohmann::json network() const;
  nlohmann::json model_list() const;

 private:
  const Prices prices_;
  const std::string replica_;
  const PodTable& pods_;
  const Verifier& verifier_;
  const Loads& loads_;
  Credits& credits_;

  mutable std::mutex mutex_;  // guards what follows
  struct Totals {
    int64_t requests = 0, active = 0, failed = 0, tokens = 0, prompt_tokens = 0, unpaid = 0;
  } totals_;
  std::deque<nlohmann::json> recent_;  // the last kRecent requests, newest last
};

}  // namespace herd::hub
