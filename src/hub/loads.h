// The hub's loads (issue 28, "the hub's state"): requests for models no live pod serves,
// and the loads they start. The counting and the choices are demand.h's (its flow diagram);
// this room adds what needs the network: the live pods that could load a model (from the pod
// table), the order to one of them (POST /api/load with its control token) and the message
// the client waits with.
//
// Thread-safe: its own lock guards the demand; it calls the pod table (the innermost lock)
// while holding it, and makes the HTTP call to a pod outside it.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hub/demand.h"
#include "hub/pod_clients.h"
#include "hub/pod_table.h"
#include "hub/registration.h"

namespace herd::hub {

class Loads {
 public:
  // REQUIRES: `pods` and `clients` outlive it.
  Loads(DemandOptions options, PodTable& pods, const PodClients& clients)
      : demand_(options), pods_(pods), clients_(clients) {}

  // A pod registered (or said it is alive): what it could load. Returns its control token
  // (Demand::pod_registered).
  std::string pod_registered(const Registration& r);
  // The pod left: its token, loadable models and any load it was asked for are forgotten.
  void pod_dropped(const std::string& pod);
  // The router ids of the pods loading a model (routed nothing meanwhile: they answer 503).
  std::vector<PodId> loading_pods() const;

  // A request for `model`, which no live pod serves: counted; once its demand reaches
  // load_after, one pod that lists it as loadable is asked to load it (choose_loader).
  // Returns the message of the 503 (with Retry-After: kLoadRetryAfterSeconds) the client
  // waits with; nullopt when no pod can load it (or loads are off): the caller answers as
  // for any model no pod serves.
  std::optional<std::string> answer_unserved(const std::string& model);

  // GET /api/network's view of a pod's loads: its "loadable" and "loading".
  void add_pod_loads(nlohmann::json& pod, const std::string& pod_id) const;
  // GET /v1/models: the models none of `served` that some of `live` (node ids) can load.
  void add_loadable_models(nlohmann::json& data, const std::map<std::string, int>& served,
                           const std::vector<std::string>& live) const;
  // GET /api/network's "loads" (Demand::view).
  nlohmann::json view() const;

 private:
  struct LoadOrder {
    std::string pod;
    PodAddress address;
    std::string token;
  };
  std::string send_load(const std::string& model, const LoadOrder& order);

  mutable std::mutex mutex_;  // guards demand_
  Demand demand_;
  PodTable& pods_;
  const PodClients& clients_;
};

}  // namespace herd::hub
