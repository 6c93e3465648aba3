#include "hub/hub_server.h"

#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "hub/registration.h"
#include "hub/router.h"
#include "util/error.h"

namespace herd::hub {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& type,
                const std::string& message) {
  send_json(res, status, {{"error", {{"message", message}, {"type", type}}}});
}

}  // namespace

struct HubServer::State {
  explicit State(HubOptions o) : options(std::move(o)) {}

  struct Pod {
    PodId id = 0;
    Registration registration;
    Clock::time_point first_seen, last_seen;
  };

  HubOptions options;
  httplib::Server http;
  int port = 0;

  mutable std::mutex mutex;  // guards what follows
  Router router;
  std::map<std::string, Pod> pods;        // by node id text
  std::map<std::string, ModelId> models;  // model name -> the router's id
  bool stopping = false;
  std::condition_variable stop_changed;

  ModelId model_id(const std::string& name) {
    const auto [it, added] = models.emplace(name, static_cast<ModelId>(models.size()));
    return it->second;
  }

  bool authorized(const httplib::Request& req) const {
    if (options.api_keys.empty()) return true;
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (header.rfind(prefix, 0) != 0) return false;
    const std::string key = header.substr(prefix.size());
    return std::find(options.api_keys.begin(), options.api_keys.end(), key) !=
           options.api_keys.end();
  }

  void register_pod(const httplib::Request& req, httplib::Response& res) {
    Registration r;
    try {
      r = parse_registration(req.body);
    } catch (const Error& e) {
      return send_error(res, 400, "invalid_request_error", e.what());
    }
    try {
      r = verify_registration(req.body, req.get_header_value("X-Herd-Signature"), unix_ms(),
                              options.max_clock_skew_ms);
    } catch (const Error& e) {
      return send_error(res, 403, "permission_error", e.what());
    }
    PodReport report;
    report.slots = r.slots;
    report.decode_tokens_per_s = r.decode_tokens_per_s;
    report.prefill_tokens_per_s = r.prefill_tokens_per_s;
    const std::string id = r.id.to_text();
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const ServedModel& m : r.models) report.models.push_back(model_id(m.name));
      const auto now = Clock::now();
      auto it = pods.find(id);
      if (it == pods.end()) {
        Pod pod;
        pod.id = router.add(report, 0.0);
        pod.first_seen = now;
        it = pods.emplace(id, std::move(pod)).first;
      } else {
        router.update(it->second.id, report);
      }
      it->second.registration = std::move(r);
      it->second.last_seen = now;
    }
    send_json(res, 200, {{"pod", id}, {"heartbeat_seconds", options.heartbeat.count()}});
  }

  json model_list() const {
    std::lock_guard<std::mutex> lock(mutex);
    std::map<std::string, int> served;  // name -> live pods
    for (const auto& [id, pod] : pods) {
      for (const ServedModel& m : pod.registration.models) ++served[m.name];
    }
    json data = json::array();
    for (const auto& [name, n] : served) {
      data.push_back(
          {{"id", name}, {"object", "model"}, {"owned_by", "herd-network"}, {"pods", n}});
    }
    return {{"object", "list"}, {"data", data}};
  }

  json network() const {
    std::lock_guard<std::mutex> lock(mutex);
    const auto now = Clock::now();
    json out = {{"pods", json::array()}};
    for (const auto& [id, pod] : pods) {
      const Registration& r = pod.registration;
      json models = json::array();
      for (const ServedModel& m : r.models)
        models.push_back({{"name", m.name}, {"n_ctx", m.n_ctx}});
      out["pods"].push_back(
          {{"id", id},
           {"name", r.name},
           {"url", r.url},
           {"models", models},
           {"slots", r.slots},
           {"active", router.active(pod.id)},
           {"decode_tokens_per_s", r.decode_tokens_per_s},
           {"prefill_tokens_per_s", r.prefill_tokens_per_s},
           {"memory_bytes", r.memory_bytes},
           {"uptime_seconds", std::chrono::duration<double>(now - pod.first_seen).count()},
           {"last_seen_seconds", std::chrono::duration<double>(now - pod.last_seen).count()}});
    }
    return out;
  }

  void expire() {
    std::lock_guard<std::mutex> lock(mutex);
    const auto now = Clock::now();
    for (auto it = pods.begin(); it != pods.end();) {
      if (now - it->second.last_seen > options.pod_timeout) {
        router.remove(it->second.id);
        it = pods.erase(it);
      } else {
        ++it;
      }
    }
  }

  void routes() {
    http.Post("/api/register", [this](const httplib::Request& req, httplib::Response& res) {
      register_pod(req, res);
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) {
        return send_error(res, 401, "authentication_error", "a valid API key is required");
      }
      send_json(res, 200, model_list());
    });
    http.Get("/api/network", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, network());
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mutex);
      send_json(res, 200, {{"status", "ok"}, {"pods", pods.size()}});
    });
  }
};

HubServer::HubServer(HubOptions options) : state_(std::make_unique<State>(std::move(options))) {
  State& s = *state_;
  s.http.new_task_queue = [n = s.options.http_threads] {
    return new httplib::ThreadPool(static_cast<size_t>(n));
  };
  s.http.set_payload_max_length(kMaxRegistrationBytes);
  s.routes();
}

HubServer::~HubServer() {
  stop();
}

void HubServer::bind() {
  State& s = *state_;
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host.c_str());
  } else if (s.http.bind_to_port(s.options.host.c_str(), s.options.port)) {
    s.port = s.options.port;
  } else {
    s.port = -1;
  }
  if (s.port <= 0) {
    throw Error("hub", "cannot listen on " + s.options.host + ":" + std::to_string(s.options.port));
  }
}

int HubServer::port() const {
  return state_->port;
}

void HubServer::listen() {
  State& s = *state_;
  std::thread sweeper([&s] {
    std::unique_lock<std::mutex> lock(s.mutex);
    while (!s.stopping) {
      s.stop_changed.wait_for(lock, std::chrono::seconds(1));
      lock.unlock();
      s.expire();
      lock.lock();
    }
  });
  s.http.listen_after_bind();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
  }
  s.stop_changed.notify_all();
  sweeper.join();
}

void HubServer::stop() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
  }
  s.stop_changed.notify_all();
  s.http.stop();
}

json HubServer::network() const {
  return state_->network();
}

void HubServer::expire_silent_pods() {
  state_->expire();
}

}  // namespace herd::hub
