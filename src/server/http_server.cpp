#include "server/http_server.h"

#include <httplib.h>

#include <functional>
#include <thread>

#include "http/bounded_json.h"
#include "http/guarded_server.h"
#include "server/anthropic_api.h"
#include "server/cluster_view.h"
#include "server/ollama_api.h"
#include "server/openai_api.h"
#include "server/request.h"
#include "server/response.h"
#include "server/responses_api.h"
#include "server/responses_stored.h"
#include "server/web_assets.h"

namespace herd::server {

using json = nlohmann::json;

HttpServer::HttpServer(ServerOptions options, Metrics& metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      http_(std::make_unique<http::GuardedServer>(options_.limits)) {
  for (const std::string& key : options_.api_keys) api_keys_.add(key, "an API key");
  routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ < 0) throw Error("server", "cannot listen on " + options_.host + ": no free port");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port)) {
      throw Error("server", "cannot listen on " + options_.host + ":" +
                                std::to_string(options_.port) + " (in use, or not allowed)");
    }
    port_ = options_.port;
  }
}

void HttpServer::listen() {
  http_->listen_after_bind();
}
void HttpServer::stop() {
  http_->stop();
}

// What a handler uses: the model and scheduler as they were when it started, null while
// none is loaded or another is loading. While one exists they are not replaced
// (wait_unused() waits for users_ to reach 0 after begin_loading()).
struct HttpServer::Current {
  explicit Current(const HttpServer& s) : use(s.users_) {
    if (s.loading_.load())
      return;  // after counting this user: the swap waits for it or
               // it sees the flag (both sequentially consistent)
    model = s.model_.load();
    scheduler = s.scheduler_.load();
  }
  InFlight use;
  const ServedModel* model = nullptr;
  engine::Scheduler* scheduler = nullptr;
};

void HttpServer::set_model(const ServedModel* model, engine::Scheduler* scheduler) {
  scheduler_.store(scheduler);
  model_.store(model);
  loading_.store(false);
}

bool HttpServer::wait_unused(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (users_.load() > 0 || in_flight_.load() > 0) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void HttpServer::set_degraded(const std::string& reason) {
  std::lock_guard lock(degraded_mutex_);
  degraded_ = reason;
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (in_flight_.load() > 0) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::optional<ApiError> HttpServer::auth_error(const httplib::Request& req) const {
  if (api_keys_.empty()) return std::nullopt;
  // OpenAI's and Ollama's clients send "Authorization: Bearer KEY", Anthropic's "x-api-key".
  // The header is held here: the key is a view into it.
  const std::string authorization = req.get_header_value("Authorization");
  std::optional<std::string_view> key = net::bearer_key(authorization);
  const std::string x_api_key = req.get_header_value("x-api-key");
  if (!key && !x_api_key.empty()) key = x_api_key;
  if (key && api_keys_.contains(*key)) return std::nullopt;
  const bool given = req.has_header("Authorization") || req.has_header("x-api-key");
  return ApiError(401,
                  given ? "the API key is not valid"
                        : "an API key is required (Authorization: Bearer KEY, or x-api-key: KEY)",
                  "invalid_request_error", "", "invalid_api_key");
}

std::string HttpServer::degraded_reason(engine::Scheduler* scheduler) {
  std::string degraded;
  {
    std::lock_guard lock(degraded_mutex_);
    degraded = degraded_;
  }
  if (degraded.empty() && scheduler) degraded = scheduler->unavailable();
  if (degraded.empty() && scheduler && !scheduler->failure().empty()) {
    degraded = "the model failed: " + scheduler->failure();
  }
  return degraded;
}

void HttpServer::health(httplib::Response& res, const Current& cur) {
  const std::string degraded = degraded_reason(cur.scheduler);
  engine::Scheduler* scheduler = cur.scheduler;
  if (!degraded.empty()) {
    send_json(res, 503, {{"status", "degraded"}, {"reason", degraded}});
  } else if (!cur.model || !scheduler) {
    send_json(res, 503, {{"status", "loading"}, {"reason", "the model is loading"}});
  } else {
    send_json(res, 200,
              {{"status", "ready"},
               {"slots", scheduler->n_slots()},
               {"running", scheduler->n_running()},
               {"queued", scheduler->n_queued()}});
  }
}

// GET /api/cluster: the runner's view across nodes, or the one-node view; the server's own
// failure (an engine that stopped) makes an "ok" pod "degraded".
void HttpServer::cluster(httplib::Response& res, const Current& cur) {
  const ServedModel* m = cur.model;
  engine::Scheduler* scheduler = cur.scheduler;
  if (!m || !scheduler) {
    send_json(res, 200,
              {{"state", "loading"},
               {"reason", "the model is loading"},
               {"parallel", ""},
               {"plan", nullptr},
               {"nodes", json::array()},
               {"stages", json::array()},
               {"forward_seconds", 0},
               {"events", json::array()},
               {"metrics", metrics_.summary()}});
    return;
  }
  json out = m->cluster_status ? m->cluster_status()
                               : single_node_status(m->node_info, scheduler->forward_stats());
  add_derived_figures(out);
  if (out.value("state", "ok") == "ok") {
    if (const std::string degraded = degraded_reason(scheduler); !degraded.empty()) {
      out["state"] = "degraded";
      out["reason"] = degraded;
    }
  }
  out["model"] = m->id;
  metrics_.set_queue(scheduler->n_queued(), scheduler->n_running());
  out["metrics"] = metrics_.summary();
  send_json(res, 200, out);
}

std::shared_ptr<engine::RequestStream> HttpServer::submit(
    const ServedModel& model, engine::Scheduler& scheduler, engine::GenerationParams params,
    std::shared_ptr<const JsonGrammar> grammar, const char* prompt_param) {
  if (draining_.load()) {
    throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  }
  if (!params.speculative) params.speculative = options_.speculative;
  if (grammar) {
    // The vocabulary's tables for a constraint are built (once, ~66 ms for 151k tokens) here
    // on the HTTP thread, not later while the engine thread admits the request: that would
    // stall every running stream.
    std::shared_ptr<ConstraintVocabularies> vocabularies;
    {
      std::lock_guard lock(vocabularies_mutex_);
      if (!vocabularies_ || &vocabularies_->tokenizer() != model.tokenizer) {
        vocabularies_ = std::make_shared<ConstraintVocabularies>(*model.tokenizer);
      }
      vocabularies = vocabularies_;
    }
    params.constraint = std::make_shared<JsonReplyConstraint>(
        std::move(grammar), vocabularies->get(params.render_special));
  }
  try {
    return scheduler.submit(std::move(params));
  } catch (const engine::SubmitError& e) {
    const std::string message = e.what() + std::string_view(e.what()).find("] ") + 2;
    switch (e.kind()) {
      case engine::SubmitError::Kind::kQueueFull:
        throw ApiError(503, message, "server_error", "", "queue_full");
      case engine::SubmitError::Kind::kShuttingDown:
        throw ApiError(503, message, "server_error", "", "shutting_down");
      case engine::SubmitError::Kind::kPromptTooLong:
        throw ApiError(400, message, "invalid_request_error", prompt_param,
                       "context_length_exceeded");
      case engine::SubmitError::Kind::kInvalid:
        throw ApiError(400, message, "invalid_request_error", prompt_param);
    }
    throw;
  }
}

std::function<void(const httplib::Request&, httplib::Response&)> HttpServer::generation(
    const char* endpoint, Endpoint handler, ErrorWriter write_error) {
  return [this, endpoint, handler = std::move(handler), write_error](const httplib::Request& req,
                                                                     httplib::Response& res) {
    try {
      if (const std::optional<ApiError> e = auth_error(req)) throw *e;
      const Current cur(*this);
      if (!cur.model || !cur.scheduler) {
        throw ApiError(503, "the model is loading", "server_error", "", "loading");
      }
      const std::string why = cur.scheduler->unavailable();
      if (!why.empty()) throw ApiError(503, why, "server_error", "", "unavailable");
      Serving serving(*this, *cur.model, *cur.scheduler);
      handler(req, res, serving);
    } catch (const ApiError& e) {
      write_error(res, e);
    }
    metrics_.count_request(endpoint, res.status);
  };
}

void HttpServer::routes() {
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP status " + std::to_string(res.status);
    if (res.status == 404) message = "no route for " + req.method + " " + req.path;
    if (res.status == 413) message = "the request body is too large";
    if (res.status == 405) message = "method " + req.method + " is not allowed on " + req.path;
    const char* type = res.status >= 500 ? "server_error" : "invalid_request_error";
    res.set_content(json_text(ApiError(res.status, message, type).to_json()), "application/json");
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        send_json(res, 500, ApiError(500, message, "server_error").to_json());
      });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    health(res, Current(*this));
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const Current cur(*this);
    if (engine::Scheduler* s = cur.scheduler) metrics_.set_queue(s->n_queued(), s->n_running());
    res.set_content(metrics_.prometheus(), "text/plain; version=0.0.4");
  });
  http_->Get("/api/node", [this](const httplib::Request&, httplib::Response& res) {
    json out = {{"metrics", metrics_.summary()}};
    const Current cur(*this);
    if (const ServedModel* m = cur.model) {
      out["model"] = m->id;
      out["node"] = m->node_info;
    }
    send_json(res, 200, out);
  });
  http_->Get("/api/cluster", [this](const httplib::Request&, httplib::Response& res) {
    cluster(res, Current(*this));
  });
  http_->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (const std::optional<ApiError> e = auth_error(req)) return write_openai_error(res, *e);
    json data = json::array();
    const Current cur(*this);
    if (const ServedModel* m = cur.model) {
      data.push_back({{"id", m->id}, {"object", "model"}, {"created", 0}, {"owned_by", "herd"}});
    }
    send_json(res, 200, {{"object", "list"}, {"data", data}});
  });
  for (const WebAsset& asset : web_assets()) {
    const std::string path = asset.path == "/index.html" ? "/" : std::string(asset.path);
    http_->Get(path, [asset](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(asset.content), std::string(asset.content_type));
    });
  }
  http_->Post("/v1/chat/completions",
              generation("chat_completions", openai_chat_completions, write_openai_error));
  http_->Post("/v1/completions", generation("completions", openai_completions, write_openai_error));
  http_->Post("/v1/messages", generation("messages", anthropic_messages, write_anthropic_error));
  http_->Post("/v1/messages/count_tokens",
              generation("count_tokens", anthropic_count_tokens, write_anthropic_error));
  http_->Post("/api/verify", generation("verify", herd_verify, write_openai_error));
  // OpenAI's Responses API: created as a generation; the stored ones read and deleted by id
  // (responses_stored.h) with the same key, whether or not a model is loaded.
  auto store = std::make_shared<ResponseStore>();
  http_->Post("/v1/responses",
              generation("responses", responses_endpoint(store), write_openai_error));
  using StoredRoute = std::function<nlohmann::ordered_json(const httplib::Request&)>;
  auto stored = [this](StoredRoute answer) {
    return [this, answer = std::move(answer)](const httplib::Request& req, httplib::Response& res) {
      try {
        if (const std::optional<ApiError> e = auth_error(req)) throw *e;
        const nlohmann::ordered_json body = answer(req);
        res.status = 200;
        res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                        "application/json");
      } catch (const ApiError& e) {
        write_openai_error(res, e);
      }
    };
  };
  http_->Get(R"(/v1/responses/([^/]+))", stored([store](const httplib::Request& req) {
               return retrieve_response(*store, req.matches[1]);
             }));
  http_->Delete(R"(/v1/responses/([^/]+))", stored([store](const httplib::Request& req) {
                  return delete_response(*store, req.matches[1]);
                }));
  http_->Get(R"(/v1/responses/([^/]+)/input_items)", stored([store](const httplib::Request& req) {
               return list_input_items(*store, req.matches[1], req.params);
             }));
  // Ollama's API (ollama_api.h).
  http_->Post("/api/chat", generation("ollama_chat", ollama_chat, write_ollama_error));
  http_->Post("/api/generate", generation("ollama_generate", ollama_generate, write_ollama_error));
  http_->Post("/api/show", generation("ollama_show", ollama_show, write_ollama_error));
  http_->Get("/api/tags", [this](const httplib::Request& req, httplib::Response& res) {
    if (const std::optional<ApiError> e = auth_error(req)) return write_ollama_error(res, *e);
    send_json(res, 200, ollama_tags(Current(*this).model));
  });
  http_->Get("/api/ps", [this](const httplib::Request& req, httplib::Response& res) {
    if (const std::optional<ApiError> e = auth_error(req)) return write_ollama_error(res, *e);
    send_json(res, 200, ollama_ps(Current(*this).model));
  });
  http_->Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, ollama_version());
  });
  add_ollama_unsupported_routes(*http_);
  http_->Post("/api/load",
              [this](const httplib::Request& req, httplib::Response& res) { load(req, res); });
}

// ---------------------------------------------------------------------------------------
// POST /api/load {"model": NAME}: the serving command decides (set_load_handler); 404 when
// it did not set one (this server cannot load models).

void HttpServer::load(const httplib::Request& req, httplib::Response& res) {
  if (!load_handler_) {
    return write_openai_error(res, ApiError(404,
                                            "this server loads no other model (herd serve "
                                            "--models-dir and --hub)",
                                            "invalid_request_error"));
  }
  const json body = http::parse_bounded_json(req.body);
  if (body.is_discarded() || !body.is_object() || !body.contains("model") ||
      !body["model"].is_string() || body["model"].get<std::string>().empty()) {
    return write_openai_error(
        res, ApiError(400, "the body must be {\"model\": NAME}", "invalid_request_error", "model"));
  }
  const LoadAnswer a =
      load_handler_(body["model"].get<std::string>(), req.get_header_value("Authorization"));
  if (a.status == 202) {
    return send_json(res, 202,
                     {{"status", "loading"}, {"model", body["model"]}, {"message", a.message}});
  }
  const char* type = a.status == 401 || a.status == 403 ? "authentication_error"
                     : a.status >= 500                  ? "server_error"
                                                        : "invalid_request_error";
  write_openai_error(res, ApiError(a.status, a.message, type));
}

}  // namespace herd::server
