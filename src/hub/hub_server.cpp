#include "hub/hub_server.h"

#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "hub/hub_page.h"
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

// A pod's API address: http://host:port (the registration says http:// or https://).
struct PodAddress {
  std::string host;
  int port = 80;
};

std::optional<PodAddress> pod_address(const std::string& url) {
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return std::nullopt;  // https pods: not yet
  std::string rest = url.substr(prefix.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  PodAddress a;
  const size_t colon = rest.rfind(':');
  a.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    a.port = std::stoi(port);
  }
  if (a.host.empty() || a.port < 1 || a.port > 65535) return std::nullopt;
  return a;
}

// How many pods a request is tried on before the client gets an error.
constexpr int kAttempts = 3;

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

  // A pod for the request that none of `tried` is, marked started; nullopt when none.
  std::optional<std::pair<PodId, std::string>> choose(ModelId model, int64_t prompt_tokens,
                                                      int64_t max_tokens,
                                                      const std::vector<PodId>& tried) {
    std::lock_guard<std::mutex> lock(mutex);
    const std::optional<PodId> pod =
        router.route(RouteRequest{model, prompt_tokens, max_tokens, tried});
    if (!pod) return std::nullopt;
    router.started(*pod);
    for (const auto& [id, p] : pods) {
      if (p.id == *pod) return std::make_pair(*pod, p.registration.url);
    }
    return std::nullopt;
  }

  void finished(PodId pod) {
    std::lock_guard<std::mutex> lock(mutex);
    if (router.live(pod)) router.finished(pod);
  }

  // POST /v1/chat/completions and /v1/completions: the whole request to one pod, chosen
  // by the router; tried on another (up to kAttempts) when a pod fails before its first
  // byte of answer. A streamed answer is passed on as it comes.
  void complete(const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) {
      return send_error(res, 401, "authentication_error", "a valid API key is required");
    }
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return send_error(res, 400, "invalid_request_error", "the body is not a JSON object");
    }
    if (!body.contains("model") || !body["model"].is_string()) {
      return send_error(res, 400, "invalid_request_error", "field 'model': a string is required");
    }
    const std::string name = body["model"].get<std::string>();
    int64_t max_tokens = 256;
    for (const char* field : {"max_tokens", "max_completion_tokens"}) {
      if (body.contains(field) && body[field].is_number_integer()) {
        max_tokens = std::clamp<int64_t>(body[field].get<int64_t>(), 1, int64_t{1} << 20);
      }
    }
    // Four bytes a token, roughly: the hub does not tokenize.
    const int64_t prompt_tokens = static_cast<int64_t>(req.body.size() / 4) + 1;
    ModelId model;
    {
      std::lock_guard<std::mutex> lock(mutex);
      const auto it = models.find(name);
      if (it == models.end()) {
        return send_error(res, 404, "invalid_request_error",
                          "model '" + name + "' is not served by any pod");
      }
      model = it->second;
    }
    const bool stream = body.contains("stream") && body["stream"] == true;
    if (stream) return complete_streamed(req, res, model, name, prompt_tokens, max_tokens);
    std::vector<PodId> tried;
    std::string last_failure = "no pod serves it now";
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      const auto chosen = choose(model, prompt_tokens, max_tokens, tried);
      if (!chosen) break;
      tried.push_back(chosen->first);
      const std::optional<PodAddress> address = pod_address(chosen->second);
      if (!address) {
        finished(chosen->first);
        last_failure = "its URL " + chosen->second + " is not http://HOST:PORT";
        continue;
      }
      httplib::Client client(address->host, address->port);
      client.set_connection_timeout(5);
      client.set_read_timeout(600);
      const httplib::Result answer = client.Post(req.path, req.body, "application/json");
      finished(chosen->first);
      if (answer && answer->status < 500) {
        const std::string type = answer->get_header_value("Content-Type");
        res.status = answer->status;
        res.set_content(answer->body, type.empty() ? "application/json" : type);
        res.set_header("X-Herd-Pod", chosen->second);
        return;
      }
      last_failure = answer ? "it answered " + std::to_string(answer->status)
                            : "it did not answer (" + httplib::to_string(answer.error()) + ")";
    }
    send_error(res, 503, "server_error",
               "no pod could answer for model '" + name + "': " + last_failure);
  }

  void complete_streamed(const httplib::Request& req, httplib::Response& res, ModelId model,
                         const std::string& name, int64_t prompt_tokens, int64_t max_tokens) {
    const std::string path = req.path;
    const std::string body = req.body;
    res.set_chunked_content_provider(
        "text/event-stream", [this, path, body, model, name, prompt_tokens, max_tokens](
                                 size_t, httplib::DataSink& sink) {
          std::vector<PodId> tried;
          std::string last_failure = "no pod serves it now";
          for (int attempt = 0; attempt < kAttempts; ++attempt) {
            const auto chosen = choose(model, prompt_tokens, max_tokens, tried);
            if (!chosen) break;
            tried.push_back(chosen->first);
            const std::optional<PodAddress> address = pod_address(chosen->second);
            bool wrote = false, failed = false;
            if (address) {
              httplib::Client client(address->host, address->port);
              client.set_connection_timeout(5);
              client.set_read_timeout(600);
              httplib::Request forward;
              forward.method = "POST";
              forward.path = path;
              forward.body = body;
              forward.set_header("Content-Type", "application/json");
              forward.response_handler = [&](const httplib::Response& r) {
                failed = r.status >= 500;
                if (failed) last_failure = "it answered " + std::to_string(r.status);
                return !failed;
              };
              forward.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
                wrote = true;
                return sink.write(data, n);
              };
              const httplib::Result r = client.send(forward);
              if (!r && !failed) {
                failed = true;
                last_failure = "it did not answer (" + httplib::to_string(r.error()) + ")";
              }
            } else {
              failed = true;
              last_failure = "its URL " + chosen->second + " is not http://HOST:PORT";
            }
            finished(chosen->first);
            if (wrote || !failed) {
              // Answered (or failed mid-answer: too late to try another pod).
              sink.done();
              return true;
            }
          }
          const json error = {
              {"error",
               {{"message", "no pod could answer for model '" + name + "': " + last_failure},
                {"type", "server_error"}}}};
          const std::string event = "data: " + error.dump() + "\n\ndata: [DONE]\n\n";
          sink.write(event.data(), event.size());
          sink.done();
          return true;
        });
  }

  void routes() {
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { complete(req, res); });
    http.Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res) { complete(req, res); });
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
    serve_hub_page(http);
  }
};

HubServer::HubServer(HubOptions options) : state_(std::make_unique<State>(std::move(options))) {
  State& s = *state_;
  s.http.new_task_queue = [n = s.options.http_threads] {
    return new httplib::ThreadPool(static_cast<size_t>(n));
  };
  s.http.set_payload_max_length(size_t{8} << 20);  // a request's body (registrations: 64 KiB)
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
