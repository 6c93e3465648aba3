// The one place that makes the hub's HTTP calls to its pods (issue 28, "the hub's state"):
// every call the hub makes to a pod (a client's request, a check, a load, a round trip) goes
// through here, so a rule about where the hub may connect (TLS, timeouts, the address it
// checked at registration) and how much of an answer it reads is written once. A call
// connects to the address the pod's host resolved to when it registered (pod_address.h),
// never resolving it again; https is checked against the host's name all the same.
//
// A pod is anyone who registered: its answer is read within AnswerLimits, never whole
// (docs/network.md, "Pods' answers"). Past `max_bytes` of body (as the hub gets it, inflated
// if the pod compressed it; the hub asks for none) or of the bytes on the wire (status line,
// headers and chunk framing included: `max_bytes` and 64 KiB), the call ends and the answer
// is refused as "over N bytes"; past `deadline` (from the call's start) it ends as "no answer
// within N s". On plain HTTP every read of the socket is counted and timed (a pod trickling
// a header line or a chunk size is cut off, holding at most its budget); over https httplib
// reads the wire itself, so the body alone is counted, and a watchdog thread shuts the
// socket down at the deadline (what a pod trickles into its headers there is bounded by time
// only).
//
// Thread-safe: it holds only its options, fixed at construction.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "hub/pod_address.h"

namespace httplib {
struct Request;
}

namespace herd::hub {

struct AnswerLimits {
  size_t max_bytes = 64 << 10;
  std::chrono::seconds deadline{30};
};

// What a pod answered to one call.
struct PodAnswer {
  int status = 0;  // 0: no answer (failure says why)
  std::string content_type;
  std::string body;  // empty when the request had a content_receiver of its own
  // Why there is no whole answer ("" when there is), a sentence about the pod: "it did not
  // answer (...)", "it answered over N bytes", "it did not answer within N s", "it answered
  // 503" (refused by the response handler), "it has a URL this hub cannot reach (...)".
  std::string failure;
  // It answered more than the call allowed: what no honest pod does (a fault of the pod).
  bool over_limit = false;
  bool answered() const { return failure.empty(); }
};

class PodClients {
 public:
  // `ca_file`: PEM certificate authorities to check https pods against (empty: the
  // system's).
  explicit PodClients(std::string ca_file) : ca_file_(std::move(ca_file)) {}

  // Sends `request` to the pod at `address`, connecting within `connect_seconds` and
  // reading its answer within `limits`. The answer's body goes to the request's
  // content_receiver when it has one (still counted), else into PodAnswer::body; its
  // response_handler, when set, may refuse the answer (failure: "it answered <status>").
  // Never throws.
  PodAnswer send(const PodAddress& address, httplib::Request request, const AnswerLimits& limits,
                 time_t connect_seconds = 5) const;
  PodAnswer get(const PodAddress& address, const std::string& path, const AnswerLimits& limits,
                time_t connect_seconds = 5) const;
  PodAnswer post(const PodAddress& address, const std::string& path, std::string body,
                 const AnswerLimits& limits, const std::string& authorization = "",
                 time_t connect_seconds = 5) const;

 private:
  std::string ca_file_;
};

}  // namespace herd::hub
