// A pod's side of the hub (`herd serve --hub URL`, issue 19): registers with the hub, signed
// with the pod's node identity, and registers again every heartbeat_seconds the hub asks
// for, with the time (and so the signature) fresh each time. Runs on its own thread until
// destroyed; a failed attempt is logged and retried after 5 s.
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

 private:
  void run();

  std::string url_;
  std::string ca_file_;
  std::shared_ptr<const net::NodeIdentity> identity_;
  Registration pod_;
  std::function<void(const std::string&)> log_;
  std::mutex mutex_;
  std::condition_variable stop_changed_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace herd::hub
