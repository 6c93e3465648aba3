// The one place that makes the hub's HTTP clients for its pods (issue 28, "the hub's
// state"): every call the hub makes to a pod (a client's request, a check, a load, a round
// trip) gets its client here, so a rule about where the hub may connect (TLS, timeouts, the
// address it checked at registration) is written once. A client connects to the address
// the pod's host resolved to when it registered (pod_address.h), never resolving it again;
// https is checked against the host's name all the same.
//
// Thread-safe: it holds only its options, fixed at construction.
#pragma once

#include <ctime>
#include <memory>
#include <string>

#include "hub/pod_address.h"

namespace httplib {
class Client;
}

namespace herd::hub {

class PodClients {
 public:
  // `ca_file`: PEM certificate authorities to check https pods against (empty: the
  // system's).
  explicit PodClients(std::string ca_file) : ca_file_(std::move(ca_file)) {}

  // A client for a pod's API at `address` (checked and resolved at its registration),
  // connecting within 5 s and reading for at most `read_seconds`; nullptr when it is not one
  // httplib can reach (https without TLS in this build). Never throws.
  std::unique_ptr<httplib::Client> make(const PodAddress& address, time_t read_seconds) const;

 private:
  std::string ca_file_;
};

}  // namespace herd::hub
