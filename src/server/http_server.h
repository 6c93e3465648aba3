// HttpServer: the OpenAI-compatible HTTP API (cpp-httplib) in front of a Scheduler, plus
// /health, /metrics, /api/node, /api/cluster and the embedded web page.
//
//   HttpServer server(options);
//   server.bind();                 // listening: /health says "loading"
//   ... load the model ...
//   server.set_model(&model, &scheduler);  // "ready"
//   std::thread http([&] { server.listen(); });
//   ... on SIGINT: server.begin_drain(); scheduler.shutdown(); join the engine;
//       server.wait_idle(); server.stop(); http.join();
//   ... to serve another model: server.begin_loading(); scheduler.shutdown(); join the
//       engine; server.wait_unused(); destroy the old; load; server.set_model(&new, ...)
//
// Thread safety: every handler takes the model and scheduler once, as it starts (a Current),
// and holds them until it returns (a stream, until its last byte): between begin_loading()
// and set_model() handlers take none (503 "the model is loading"), and wait_unused() returns
// once no handler holds the old ones.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/template.h"
#include "engine/scheduler.h"
#include "http/limits.h"
#include "net/api_keys.h"
#include "server/json_token_filter.h"
#include "server/metrics.h"
#include "server/output_parser.h"
#include "server/request.h"
#include "server/served_model.h"
#include "server/serving.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib
namespace herd::http {
class GuardedServer;
}

namespace herd::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (see HttpServer::port())
  std::vector<std::string> api_keys;  // empty: no authentication (net/api_keys.h)
  // Bodies, headers, deadlines and connections (a stream holds one): http/limits.h.
  http::HttpLimits limits = default_limits();
  // Speculative decoding for requests that do not say (their "speculative" field): off when
  // unset (herd serve --lookup K sets it).
  std::optional<engine::SpeculativeParams> speculative;

  // serve's: 64 connections, and as many from one address (a pod's hub reaches it from one).
  static http::HttpLimits default_limits() {
    http::HttpLimits l;
    l.max_connections = 64;
    l.max_connections_per_address = 64;
    return l;
  }
};

class HttpServer {
 public:
  HttpServer(ServerOptions options, Metrics& metrics);
  ~HttpServer();

  // Binds the listening socket. Throws herd::Error("[server] ...") when it cannot.
  void bind();
  int port() const { return port_; }
  // Serves until stop(). Call after bind(), from its own thread.
  void listen();
  void stop();

  // Serves `model` through `scheduler` (ends a begin_loading()).
  void set_model(const ServedModel* model, engine::Scheduler* scheduler);
  // From now on handlers take no model: generation requests get 503 "the model is loading"
  // and /health says "loading", as at startup, until set_model().
  void begin_loading() { loading_.store(true); }
  // Waits until no handler holds the model and scheduler of before begin_loading() (a
  // response being written included), up to `timeout`. REQUIRES: begin_loading(); the
  // scheduler's requests end (shutdown() and its engine thread joined), or this may time out.
  bool wait_unused(std::chrono::milliseconds timeout);

  // POST /api/load {"model": NAME}: what the serving command answers (status and message),
  // given the model's name and the request's Authorization header. REQUIRES: set before
  // listen(). Without one, /api/load is 404.
  struct LoadAnswer {
    int status = 202;
    std::string message;
  };
  using LoadHandler =
      std::function<LoadAnswer(const std::string& model, const std::string& authorization)>;
  void set_load_handler(LoadHandler handler) { load_handler_ = std::move(handler); }
  void set_degraded(const std::string& reason);
  // Generation requests get 503 from now on; the rest is still served.
  void begin_drain() { draining_.store(true); }
  // Waits until no generation response is being written, up to `timeout`.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  friend class Serving;
  void routes();
  // 401 when the server has API keys and the request carries none of them (a Bearer token or
  // an x-api-key header); nothing when it may go on.
  std::optional<ApiError> auth_error(const httplib::Request& req) const;
  struct Current;
  // A generation route: authorization, a loaded and available model, then `handler` with a
  // Serving; an ApiError it throws is written by `write_error` (the API's error shape); the
  // request is counted under `endpoint` in the metrics.
  std::function<void(const httplib::Request&, httplib::Response&)> generation(
      const char* endpoint, Endpoint handler, ErrorWriter write_error);
  void load(const httplib::Request& req, httplib::Response& res);
  // Queues a request, its reply held to `grammar` when one is given (Serving::submit).
  std::shared_ptr<engine::RequestStream> submit(const ServedModel& model,
                                                engine::Scheduler& scheduler,
                                                engine::GenerationParams params,
                                                std::shared_ptr<const JsonGrammar> grammar,
                                                const char* prompt_param);
  void health(httplib::Response& res, const Current& cur);
  void cluster(httplib::Response& res, const Current& cur);
  // Why the server cannot generate (the engine stopped, the last pass failed); empty: it can.
  std::string degraded_reason(engine::Scheduler* scheduler);

  ServerOptions options_;
  net::ApiKeys api_keys_;  // options_.api_keys, looked up in constant time
  Metrics& metrics_;
  std::unique_ptr<http::GuardedServer> http_;
  int port_ = 0;
  std::atomic<const ServedModel*> model_{nullptr};
  std::atomic<engine::Scheduler*> scheduler_{nullptr};
  // The served tokenizer's constraint vocabularies (a swapped model gets new ones).
  std::mutex vocabularies_mutex_;
  std::shared_ptr<ConstraintVocabularies> vocabularies_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> loading_{false};
  mutable std::atomic<int64_t> users_{0};  // handlers holding a Current
  LoadHandler load_handler_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex degraded_mutex_;
  std::string degraded_;
};

}  // namespace herd::server
