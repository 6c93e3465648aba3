#include "hub/registrar.h"

#include <arpa/inet.h>

#include <cmath>
#include <exception>

#include "hub/pod_address.h"
#include "hub/registration.h"
#include "util/error.h"

namespace herd::hub {

std::string address_key(const std::string& client_address) {
  in6_addr a6{};
  if (inet_pton(AF_INET6, client_address.c_str(), &a6) != 1) return client_address;
  const uint8_t* b = a6.s6_addr;
  bool mapped = b[10] == 0xff && b[11] == 0xff;
  for (int i = 0; i < 10; ++i) mapped = mapped && b[i] == 0;
  if (mapped) {
    return std::to_string(b[12]) + "." + std::to_string(b[13]) + "." + std::to_string(b[14]) + "." +
           std::to_string(b[15]);
  }
  for (int i = 8; i < 16; ++i) a6.s6_addr[i] = 0;
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, &a6, text, sizeof text);
  return std::string(text) + "/64";
}

namespace {

Registrar::Answer refused(int status, const std::string& type, const std::string& message) {
  Registrar::Answer a;
  a.status = status;
  a.type = type;
  a.message = message;
  return a;
}

}  // namespace

Registrar::Answer Registrar::register_pod(std::string_view body, std::string_view signature,
                                          const std::string& client_address, int64_t now_ms) {
  try {
    Registration r;
    try {
      r = parse_registration(body);
    } catch (const Error& e) {
      return refused(400, "invalid_request_error", e.what());
    }
    try {
      r = verify_registration(body, signature, now_ms, options_.max_clock_skew_ms);
    } catch (const Error& e) {
      return refused(403, "permission_error", e.what());
    }
    return accept(r, now_ms, client_address);
  } catch (const std::exception& e) {
    return refused(500, "server_error", std::string("registration: ") + e.what());
  }
}

Registrar::Answer Registrar::accept(const Registration& r, int64_t now_ms,
                                    const std::string& client_address) {
  const std::string id = r.id.to_text();
  PodAddress address;
  const std::optional<LivePod> live = pods_.find(id);
  if (live && live->registration.url != r.url) {
    return refused(409, "conflict_error",
                   "registration: pod " + id + " is live at " + live->registration.url +
                       "; one identity serves one URL at a time, so it cannot also register " +
                       r.url + " (it may once the first is silent for the hub's pod timeout)");
  }
  if (!live) {
    // A new pod: limited per client address before anything is remembered of it.
    const double wait = new_pods_.take(address_key(client_address));
    if (wait > 0) {
      Answer a = refused(429, "rate_limit_error",
                         "registration: too many new pods from " + client_address + " (" +
                             std::to_string(static_cast<int64_t>(options_.new_pods_per_minute)) +
                             " a minute)");
      a.retry_after_seconds = static_cast<int64_t>(std::ceil(wait));
      return a;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t& last = last_time_ms_[id];
    if (r.time_ms <= last) {
      return refused(403, "permission_error",
                     "registration: time_ms " + std::to_string(r.time_ms) +
                         " is not newer than the last accepted for this id (" +
                         std::to_string(last) + "): a replay");
    }
    last = r.time_ms;
  }
  if (live) {
    address = live->address;  // resolved once, when it registered this URL
  } else {
    std::vector<std::string> resolved;
    try {
      address = parse_pod_url(r.url);
      resolved = resolve_host(address.host);
    } catch (const Error& e) {
      return refused(400, "invalid_request_error", e.what());
    }
    try {
      pin_pod_address(address, resolved, options_.allow_private_pods);
    } catch (const Error& e) {
      return refused(403, "permission_error", e.what());
    }
  }
  try {
    credits_.open_pod(id);
  } catch (const Error& e) {
    return refused(503, "server_error", e.what());
  }
  if (const std::string conflict = pods_.registered(r, address, std::chrono::steady_clock::now());
      !conflict.empty()) {
    return refused(409, "conflict_error", "registration: " + conflict);
  }
  Answer a;
  a.body = {{"pod", id},
            {"heartbeat_seconds", options_.heartbeat_seconds},
            {"control_token", loads_.pod_registered(r)}};
  return a;
}

void Registrar::expire(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A registration older than the skew window is refused as stale whatever its time: the
  // last time of an id is needed only until then.
  std::erase_if(last_time_ms_, [&](const auto& entry) {
    return entry.second < now_ms - options_.max_clock_skew_ms;
  });
}

size_t Registrar::remembered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_time_ms_.size();
}

}  // namespace herd::hub
