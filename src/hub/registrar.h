// The hub's registrations (issue 28, "Registrations"): POST /api/register from anyone, a
// pod's signed registration (registration.h), turned into a live pod in the pod table only
// when every rule holds. In order, each refusal with its status:
//
//   400  the body or a field is wrong (registration.h), the URL's scheme, host or port
//        among them (pod_address.h: a port 99999999999 is "not in 1..65535"), or its
//        host does not resolve
//   403  the signature is not the id's, time_ms is outside max_clock_skew_ms of the hub's
//        clock, or time_ms is not newer than the last registration accepted for that id (a
//        replay, even within the skew window); or the URL's host is at an address that is
//        not public while the hub does not allow private pods
//   409  the id is live at another URL: one identity serves one URL at a time (the message
//        names both). A pod that moves registers once its old URL was silent for
//        pod_timeout. (Not keyed by identity and model: the router, the records and the
//        credits are an identity's, so one identity at two URLs would be one pod whose
//        requests go to either, the flipping issue 28 found.)
//   429  a registration that would add a pod (its id is not live now) from a client address
//        (IPv6: its /64) beyond new_pods_per_minute (with Retry-After); a live pod's
//        heartbeats are not limited, as they add nothing
//
// A new pod's host is resolved once and the address pinned (pod_address.h); its heartbeats
// (same id, same URL) keep it. What it remembers is bounded: the last time_ms per id only as
// long as a replay could pass the skew check (expire()), the rate limit's buckets only while
// not full (rate_limit.h), the pods and their records as the pod table says (pod_table.h).
//
// Thread-safe: its own lock guards the last times; it calls the pod table, the loads and the
// credits outside it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hub/credits.h"
#include "hub/loads.h"
#include "hub/pod_table.h"
#include "hub/rate_limit.h"

namespace herd::hub {

struct RegistrarOptions {
  bool allow_private_pods = false;
  double new_pods_per_minute = 30;  // per client address (0: no limit)
  int64_t max_clock_skew_ms = 5 * 60 * 1000;
  int64_t heartbeat_seconds = 10;
};

class Registrar {
 public:
  // What the hub answers: 200 with `body`, else `status` with an error of `type` and
  // `message` (and Retry-After when retry_after_seconds > 0).
  struct Answer {
    int status = 200;
    std::string type, message;
    nlohmann::json body;
    int64_t retry_after_seconds = 0;
  };

  // REQUIRES: `pods`, `loads` and `credits` outlive it.
  Registrar(RegistrarOptions options, PodTable& pods, Loads& loads, Credits& credits)
      : options_(options),
        pods_(pods),
        loads_(loads),
        credits_(credits),
        new_pods_(options.new_pods_per_minute) {}

  // A registration `body` with its X-Herd-Signature, from `client_address`, at the hub's
  // `now_ms` (Unix milliseconds). Never throws.
  Answer register_pod(std::string_view body, std::string_view signature,
                      const std::string& client_address, int64_t now_ms);
  // Forgets the last times that a replay could no longer use (older than the skew window).
  void expire(int64_t now_ms);

  // The ids whose last time is remembered (tests of its bound).
  size_t remembered() const;

 private:
  Answer accept(const Registration& r, int64_t now_ms, const std::string& client_address);

  const RegistrarOptions options_;
  PodTable& pods_;
  Loads& loads_;
  Credits& credits_;
  RateLimit new_pods_;  // by client address (IPv6: its /64)

  mutable std::mutex mutex_;                     // guards what follows
  std::map<std::string, int64_t> last_time_ms_;  // by id: the newest time_ms accepted
};

// The key a client address is limited by: an IPv4 address (IPv4-mapped IPv6 ones too) as
// it is, an IPv6 address as its /64 (one host's share of a network).
std::string address_key(const std::string& client_address);

}  // namespace herd::hub
