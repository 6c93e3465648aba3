// A pod's side of the hub (`herd serve --hub URL`, issue 19): registers with the hub, signed
// with the pod's node identity, and registers again every heartbeat_seconds the hub asks
// for, with the time (and so the signature) fresh each time. Runs on its own thread until
// destroyed; a failed attempt is logged and retried after 5 s. The hub's answer carries the
// pod's control token (the proof that a POST /api/load comes from this hub); the latest is
// kept. Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "hub/registration.h"

namespace herd::hub {

// http[s]://host[:port] without a trailing '/'. Throws herd::Error("hub", ...) naming the URL
// when it is not one (https: also when this herd was built without TLS).
std::string parse_hub_url(std::string url);

class HubClient {
 public:
  // `hub_url`: http[s]://host:port of `herd hub`. `pod`: what to register (id and time are
  // set here). `ca_file`: certificate authorities that vouch for an https hub (empty: the
  // system's). Throws herd::Error for a URL that is not http[s]://host[:port].
  HubClient(std::string hub_url, std::shared_ptr<const net::NodeIdentity> identity,
            Registration pod, std::function<void(const std::string&)> log,
            std::string ca_file = {});
  ~HubClient();
  HubClient(const HubClient&) = delete;
  HubClient& operator=(const HubClient&) = delete;

  // Registers once now: the seconds until the next registration the hub asked for.
  // Throws herd::Error naming the hub and its answer when it refused or did not answer.
  int register_once();
  // What to register from now on (id and time are set here), registered at once: the pod
  // serves another model, and the hub should not wait for the heartbeat to know it.
  void update(Registration pod);
  // The control token of the hub's last answer ("" before one).
  std::string control_token() const;

 private:
  void run();

  std::string url_;
  std::string ca_file_;
  std::shared_ptr<const net::NodeIdentity> identity_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mutex_;  // guards what follows
  Registration pod_;
  int64_t last_time_ms_ = 0;  // of the last registration sent
  std::string control_token_;
  std::condition_variable stop_changed_;
  bool stopping_ = false;
  bool register_now_ = false;
  std::thread thread_;
};

}  // namespace herd::hub
