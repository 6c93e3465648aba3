// The one place that makes the hub's HTTP clients for its pods (issue 28, "the hub's
// state"): every call the hub makes to a pod (a client's request, a check, a load, a round
// trip) gets its client here, so a rule about where the hub may connect (TLS, timeouts, the
// address it checked at registration) is written once.
//
// Thread-safe: it holds only its options, fixed at construction.
#pragma once

#include <ctime>
#include <memory>
#include <string>

namespace httplib {
class Client;
}

namespace herd::hub {

class PodClients {
 public:
  // `ca_file`: PEM certificate authorities to check https pods against (empty: the
  // system's).
  explicit PodClients(std::string ca_file) : ca_file_(std::move(ca_file)) {}

  // A client for a pod's API at `url` (http:// or https://, as its registration says),
  // connecting within 5 s and reading for at most `read_seconds`; nullptr when the URL is
  // not one httplib can reach (or https without TLS in this build).
  std::unique_ptr<httplib::Client> make(const std::string& url, time_t read_seconds) const;

 private:
  std::string ca_file_;
};

}  // namespace herd::hub
