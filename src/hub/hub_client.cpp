#include "hub/hub_client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace herd::hub {

HubClient::HubClient(std::string hub_url, std::shared_ptr<const net::NodeIdentity> identity,
                     Registration pod, std::function<void(const std::string&)> log)
    : url_(std::move(hub_url)),
      identity_(std::move(identity)),
      log_(std::move(log)),
      pod_(std::move(pod)) {
  const std::string prefix = "http://";
  std::string rest = url_.rfind(prefix, 0) == 0 ? url_.substr(prefix.size()) : "";
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  host_ = rest.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      port_ = std::stoi(rest.substr(colon + 1));
    } catch (const std::exception&) {
      port_ = -1;
    }
  }
  if (host_.empty() || rest.find('/') != std::string::npos || port_ <= 0 || port_ > 65535) {
    throw Error("hub", "hub URL '" + url_ + "' is not http://HOST[:PORT]");
  }
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
  }
  r.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  const std::string body = registration_body(r);
  httplib::Client client(host_, port_);
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
