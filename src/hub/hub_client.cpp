#include "hub/hub_client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace herd::hub {

std::string parse_hub_url(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  const bool http = url.rfind("http://", 0) == 0, https = url.rfind("https://", 0) == 0;
  const size_t host = url.find("//") + 2;
  if ((!http && !https) || url.find('/', host) != std::string::npos ||
      !httplib::Client(url).is_valid()) {
    throw Error("hub", "hub URL '" + url + "' is not http[s]://HOST[:PORT]" +
                           (https ? " (or this herd was built without TLS)" : ""));
  }
  return url;
}

HubClient::HubClient(std::string hub_url, std::shared_ptr<const net::NodeIdentity> identity,
                     Registration pod, std::function<void(const std::string&)> log,
                     std::string ca_file)
    : url_(std::move(hub_url)),
      ca_file_(std::move(ca_file)),
      identity_(std::move(identity)),
      log_(std::move(log)),
      pod_(std::move(pod)) {
  url_ = parse_hub_url(url_);
  pod_.id = identity_->id();
  thread_ = std::thread([this] { run(); });
}

HubClient::~HubClient() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_changed_.notify_all();
  thread_.join();
}

void HubClient::update(Registration pod) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pod.id = identity_->id();
    pod_ = std::move(pod);
    register_now_ = true;
  }
  stop_changed_.notify_all();
}

std::string HubClient::control_token() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return control_token_;
}

int HubClient::register_once() {
  Registration r;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    r = pod_;
    // Each registration newer than the last: the hub refuses one that is not (a replay).
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    r.time_ms = last_time_ms_ = std::max(now, last_time_ms_ + 1);
  }
  const std::string body = registration_body(r);
  httplib::Client client(url_);
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (!ca_file_.empty()) client.set_ca_cert_path(ca_file_.c_str());
#endif
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  const httplib::Result res = client.Post(
      "/api/register", httplib::Headers{{"X-Herd-Signature", sign_registration(*identity_, body)}},
      body, "application/json");
  if (!res) {
    throw Error("hub", "hub " + url_ + " did not answer: " + httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    throw Error("hub", "hub " + url_ + " refused the registration: " + std::to_string(res->status) +
                           " " + res->body.substr(0, 300));
  }
  const nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, false);
  if (answer.is_discarded() || !answer.contains("heartbeat_seconds") ||
      !answer["heartbeat_seconds"].is_number_integer()) {
    throw Error("hub",
                "hub " + url_ + " answered the registration with: " + res->body.substr(0, 300));
  }
  if (answer.contains("control_token") && answer["control_token"].is_string()) {
    std::lock_guard<std::mutex> lock(mutex_);
    control_token_ = answer["control_token"].get<std::string>();
  }
  return std::clamp(answer["heartbeat_seconds"].get<int>(), 1, 3600);
}

void HubClient::run() {
  bool registered = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    int wait_seconds = 5;
    try {
      wait_seconds = register_once();
      if (!registered)
        log_("registered with the hub at " + url_ + " as " + identity_->id().to_text());
      registered = true;
    } catch (const Error& e) {
      log_(std::string(e.what()) + "; trying again in 5 s");
      registered = false;
    }
    lock.lock();
    stop_changed_.wait_for(lock, std::chrono::seconds(wait_seconds),
                           [this] { return stopping_ || register_now_; });
    register_now_ = false;
  }
}

}  // namespace herd::hub
