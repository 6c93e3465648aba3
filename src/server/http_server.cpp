#include "server/http_server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <ctime>
#include <functional>
#include <thread>

#include "http/bounded_json.h"
#include "http/guarded_server.h"
#include "server/argument_types.h"
#include "server/cluster_view.h"
#include "server/request.h"
#include "server/response.h"
#include "server/tool_call_grammar.h"
#include "server/verify_render.h"
#include "server/web_assets.h"
#include "util/open_files.h"

namespace herd::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr auto kWaitSlice = std::chrono::milliseconds(250);
// An idle stream (queued behind others) sends an SSE comment this often, so that a client
// that went away is noticed: the write fails.
constexpr auto kKeepAlive = std::chrono::seconds(2);

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), e.to_json());
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

// Decrements the in-flight counter when the response is done, however it ends.
struct InFlight {
  explicit InFlight(std::atomic<int64_t>& n) : n_(&n) { n_->fetch_add(1); }
  ~InFlight() { n_->fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::atomic<int64_t>* n_;
};

// The socket of the connection `req` came on, found by its addresses: cpp-httplib 0.11
// (Debian's) hands handlers no socket and no way to ask whether the client is still there.
// -1 when none matches. The connection stays open while its handler runs, so the socket
// found is this connection's for that long.
int connection_socket(const httplib::Request& req) {
  auto port_and_address = [](const sockaddr_storage& a, std::string& address) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto& in = reinterpret_cast<const sockaddr_in&>(a);
      inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
      address = text;
      return static_cast<int>(ntohs(in.sin_port));
    }
    if (a.ss_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
      inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
      address = text;
      return static_cast<int>(ntohs(in6.sin6_port));
    }
    return -1;
  };
  for (const int fd : open_file_descriptors()) {
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
      continue;
    }
    std::string local_address, peer_address;
    if (port_and_address(local, local_address) == req.local_port &&
        port_and_address(peer, peer_address) == req.remote_port &&
        peer_address == req.remote_addr) {
      return fd;
    }
  }
  return -1;
}

// Whether the client of a connection has gone: it closed (or reset) the connection. A
// client that only half-closes after sending its request counts as gone too; HTTP clients
// do not do that while they wait for a response.
bool client_gone(int fd) {
  if (fd < 0) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

// Reads a stream to its end (non-streaming responses). A client that goes away meanwhile
// has its request cancelled, which frees the slot at the next step (as streams do when a
// write fails).
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<engine::TokenLogprob> logprobs;
  std::vector<engine::TokenScore> scores;
  engine::Finish finish;
};
Collected collect(engine::RequestStream& stream, const httplib::Request& req) {
  const int fd = connection_socket(req);
  Collected c;
  for (;;) {
    if (!stream.cancelled() && client_gone(fd)) stream.cancel();
    engine::StreamUpdate u = stream.wait(kWaitSlice);
    c.text += u.text;
    c.tokens.insert(c.tokens.end(), u.tokens.begin(), u.tokens.end());
    c.logprobs.insert(c.logprobs.end(), u.logprobs.begin(), u.logprobs.end());
    c.scores.insert(c.scores.end(), u.scores.begin(), u.scores.end());
    if (u.finish) {
      c.finish = *u.finish;
      return c;
    }
  }
}

// herd's extension of an answer for a hub: the generated tokens' ids.
json herd_extension(const std::vector<int32_t>& tokens) {
  return {{"completion_token_ids", tokens}};
}

ApiError generation_error(const engine::Finish& f) {
  return ApiError(500, "generation failed: " + f.error, "server_error", "", "generation_failed");
}

}  // namespace

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

bool HttpServer::authorized(const httplib::Request& req, httplib::Response& res) {
  if (api_keys_.empty()) return true;
  const std::optional<std::string_view> key =
      net::bearer_key(req.get_header_value("Authorization"));
  if (key && api_keys_.contains(*key)) return true;
  const bool given = req.has_header("Authorization");
  send_error(res, ApiError(401,
                           given ? "the API key is not valid"
                                 : "an API key is required "
                                   "(Authorization: Bearer KEY)",
                           "invalid_request_error", "", "invalid_api_key"));
  return false;
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
    const Current& cur, engine::GenerationParams params, std::shared_ptr<const JsonGrammar> grammar,
    const char* prompt_param) {
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
      if (!vocabularies_ || &vocabularies_->tokenizer() != cur.model->tokenizer) {
        vocabularies_ = std::make_shared<ConstraintVocabularies>(*cur.model->tokenizer);
      }
      vocabularies = vocabularies_;
    }
    params.constraint = std::make_shared<JsonReplyConstraint>(
        std::move(grammar), vocabularies->get(params.render_special));
  }
  try {
    return cur.scheduler->submit(std::move(params));
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
    if (!authorized(req, res)) return;
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
  auto guarded = [this](const char* endpoint, auto handler) {
    return [this, endpoint, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        if (authorized(req, res)) {
          const Current cur(*this);
          if (!cur.model || !cur.scheduler) {
            throw ApiError(503, "the model is loading", "server_error", "", "loading");
          }
          const std::string why = cur.scheduler->unavailable();
          if (!why.empty()) throw ApiError(503, why, "server_error", "", "unavailable");
          (this->*handler)(req, res, cur);
        }
      } catch (const ApiError& e) {
        send_error(res, e);
      }
      metrics_.count_request(endpoint, res.status);
    };
  };
  http_->Post("/v1/chat/completions", guarded("chat_completions", &HttpServer::chat_completions));
  http_->Post("/v1/completions", guarded("completions", &HttpServer::completions));
  http_->Post("/api/verify", guarded("verify", &HttpServer::verify));
  http_->Post("/api/load",
              [this](const httplib::Request& req, httplib::Response& res) { load(req, res); });
}

// ---------------------------------------------------------------------------------------
// POST /v1/chat/completions

namespace {

void check_model(const SamplingRequest& r, const ServedModel& m) {
  if (!r.model.empty() && r.model != m.id) {
    throw ApiError(404,
                   "the model '" + r.model + "' does not exist (this server has '" + m.id + "')",
                   "invalid_request_error", "model", "model_not_found");
  }
}

engine::GenerationParams generation_params(const SamplingRequest& r) {
  engine::GenerationParams g;
  g.max_tokens = r.max_tokens;
  g.sampler = r.sampler;
  g.stop = r.stop;
  g.top_logprobs = r.top_logprobs;
  g.stop_at_eog = !r.ignore_eos;
  g.speculative = r.speculative;
  return g;
}

// Writes what one step of a stream produced: its events, else a keep-alive comment after
// kKeepAlive of silence, else nothing. A failed write means the client went away: its
// request is cancelled at once, which frees the slot. False ends the response.
bool write_events(httplib::DataSink& sink, std::string& out, engine::RequestStream& stream,
                  Clock::time_point& last_write) {
  if (out.empty() && Clock::now() - last_write > kKeepAlive) out = ": keep-alive\n\n";
  if (out.empty()) return true;
  last_write = Clock::now();
  if (!sink.write(out.data(), out.size())) {
    stream.cancel();
    return false;
  }
  return true;
}

// Ends a stream: a failed generation's error event, or else the final chunk that `last`
// builds (called only then) and, when `usage_object` is given, the usage chunk; then [DONE].
bool finish_events(httplib::DataSink& sink, std::string& out, const engine::Finish& finish,
                   const std::function<json()>& last, const ResponseHeader& header,
                   const char* usage_object) {
  if (finish.reason == engine::FinishReason::kError) {
    out += sse_event(generation_error(finish).to_json());
  } else {
    const json chunk = last();
    out += sse_event(chunk);
    if (usage_object != nullptr) out += sse_event(usage_chunk(header, finish, usage_object));
  }
  out += sse_done();
  const bool ok = sink.write(out.data(), out.size());
  sink.done();
  return ok;
}

// The streamed state of one chat response; lives as long as its content provider.
struct ChatStream {
  std::shared_ptr<engine::RequestStream> stream;
  OutputParser parser;
  ResponseHeader header;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  bool include_usage = false;
  bool logprobs = false;
  bool sent_role = false;
  Clock::time_point last_write = Clock::now();
  std::unique_ptr<InFlight> in_flight;
  bool token_ids = false;       // herd's extension: the final chunk carries them
  std::vector<int32_t> tokens;  // generated so far (when token_ids)
};

// A request as the engine runs it: its prompt's tokens and sampling, the JSON grammar its
// reply is held to (none: free), and how a chat reply is read (reasoning, tool calls). `n`
// numbers the response (tool-call ids).
struct ChatRun {
  engine::GenerationParams params;
  std::shared_ptr<const JsonGrammar> grammar;
  OutputParserOptions parser;
};

ChatRun prepare_chat(const ServedModel& m, const ChatRequest& r, uint64_t n) {
  if (!m.chat_template) {
    throw ApiError(400, "the model has no chat template; use /v1/completions",
                   "invalid_request_error", "messages");
  }
  std::string prompt;
  try {
    const ojson messages = arguments_as_objects(r.messages);
    auto render = [&](const ojson& m_messages) {
      return m.chat_template->render(chat::chat_variables(m_messages,
                                                          r.tools.is_null() ? nullptr : &r.tools,
                                                          true, m.bos, m.eos, r.template_kwargs));
    };
    try {
      prompt = render(messages);
    } catch (const chat::TemplateRaised&) {
      throw;
    } catch (const Error&) {
      // Some templates (gpt-oss's) look inside every message's content, which fails on the
      // null content OpenAI clients send beside tool calls: those read "" instead. Another
      // failure is the first one's.
      const ojson filled = null_content_as_empty(messages);
      if (filled == messages) throw;
      try {
        prompt = render(filled);
      } catch (const Error&) {
        render(messages);  // throws the first failure again
        throw;
      }
    }
  } catch (const chat::TemplateRaised& e) {
    throw ApiError(400, "the chat template refused the messages: " + e.message(),
                   "invalid_request_error", "messages");
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template failed: ") + e.what(),
                   "invalid_request_error", "messages");
  }
  const bool parse_tools = !r.tools.is_null() && r.tool_choice.kind != ToolChoice::Kind::kNone;
  OutputParserOptions po;
  set_reasoning(po, m.template_source, prompt);
  po.harmony = uses_harmony(m.template_source);
  po.tools = parse_tools ? detect_tool_format(m.template_source) : ToolFormat::kNone;
  po.id_prefix = "call_" + std::to_string(n) + "_";
  if (parse_tools) po.parameter_types = parameter_types(r.tools);
  std::shared_ptr<const JsonGrammar> grammar = r.response_format.grammar;
  if (grammar && !r.tool_choice.forces_call()) {
    // A reply held to JSON is content only: it skips the reasoning the template opened (as a
    // forced call does), and markers inside its strings are text, not calls or reasoning.
    if (po.starts_in_reasoning) prompt += std::string(po.reasoning_markers.close) + "\n\n";
    // Harmony: the JSON is the final channel's message, which the prompt opens.
    if (po.harmony) prompt += "<|channel|>final<|message|>";
    po.reasoning = po.starts_in_reasoning = po.harmony = false;
    po.tools = ToolFormat::kNone;
  }
  if (r.tool_choice.forces_call()) {
    // A call is forced by writing its opening at the end of the prompt, in the family's
    // format (generation continues inside the call), and by holding the rest of it to the
    // function's name and parameters.
    if (!can_force_calls(po.tools)) {
      throw ApiError(400,
                     "tool_choice cannot be enforced for this model's chat template: it shows no "
                     "tool-call format herd reads",
                     "invalid_request_error", "tool_choice");
    }
    po.forced_call = true;
    po.forced_name = r.tool_choice.function;
    po.tool_names = tool_names(r.tools);
    prompt += forced_reply_opening(po);
    // Where arguments are not JSON the opening alone forces the call (and a stop ends it).
    grammar = grammar_holds_arguments(po.tools) ? forced_call_grammar(po, r.tools) : nullptr;
  }

  engine::GenerationParams g = generation_params(r.sampling);
  if (po.forced_call && !grammar) g.stop.emplace_back(call_block_end(po.tools));
  // Tool-call markers may be control tokens ([TOOL_CALLS], <|python_tag|>), and so are
  // harmony's channel markers.
  g.render_special = po.tools != ToolFormat::kNone || po.harmony;
  // The template writes the special tokens itself (BOS included where it wants one).
  g.prompt = m.tokenizer->encode(prompt, false, true);
  return {std::move(g), std::move(grammar), std::move(po)};
}

}  // namespace

void HttpServer::chat_completions(const httplib::Request& req, httplib::Response& res,
                                  const Current& cur) {
  const ServedModel& m = *cur.model;
  ChatRequest r = parse_chat_request(req.body);
  check_model(r.sampling, m);
  const uint64_t n = next_id_.fetch_add(1);
  auto [g, grammar, po] = prepare_chat(m, r, n);
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  std::shared_ptr<engine::RequestStream> stream = submit(cur, std::move(g), grammar, "messages");
  ResponseHeader header{"chatcmpl-" + std::to_string(n), unix_now(), m.id};

  if (!r.sampling.stream) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    OutputParser parser(po);
    ParsedDelta all = parser.push(c.text);
    all.append(parser.finish());
    const json lp = r.sampling.top_logprobs >= 0 ? logprobs_json(*m.tokenizer, c.logprobs) : json();
    json answer = chat_completion(header, all, c.finish, lp);
    if (r.sampling.herd_token_ids) answer["herd"] = herd_extension(c.tokens);
    send_json(res, 200, answer);
    return;
  }

  auto state = std::make_shared<ChatStream>(ChatStream{stream,
                                                       OutputParser(po),
                                                       header,
                                                       m.tokenizer,
                                                       r.sampling.include_usage,
                                                       r.sampling.top_logprobs >= 0,
                                                       false,
                                                       Clock::now(),
                                                       std::move(in_flight),
                                                       r.sampling.herd_token_ids,
                                                       {}});
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!state->sent_role) {
          state->sent_role = true;
          out += sse_event(chat_chunk(state->header, {{"role", "assistant"}, {"content", ""}},
                                      nullptr, nullptr));
        }
        engine::StreamUpdate u = state->stream->wait(kWaitSlice);
        if (state->token_ids) {
          state->tokens.insert(state->tokens.end(), u.tokens.begin(), u.tokens.end());
        }
        auto add_delta = [&](const ParsedDelta& d, const json& logprobs) {
          if (d.empty() && logprobs.is_null()) return;
          out += sse_event(chat_chunk(state->header, chat_delta(d), nullptr, logprobs));
        };
        if (!u.text.empty() || !u.tokens.empty()) {
          json lp;
          if (state->logprobs && !u.logprobs.empty()) {
            lp = logprobs_json(*state->tokenizer, u.logprobs);
          }
          add_delta(state->parser.push(u.text), lp);
        }
        if (u.finish) {
          auto last = [&] {
            add_delta(state->parser.finish(), json());
            json chunk = chat_chunk(
                state->header, json::object(),
                openai_finish_reason(*u.finish, state->parser.n_tool_calls() > 0), nullptr);
            if (state->token_ids) chunk["herd"] = herd_extension(state->tokens);
            return chunk;
          };
          return finish_events(sink, out, *u.finish, last, state->header,
                               state->include_usage ? "chat.completion.chunk" : nullptr);
        }
        return write_events(sink, out, *state->stream, state->last_write);
      },
      [state](bool success) {
        if (!success) state->stream->cancel();
        state->in_flight.reset();
      });
}

// ---------------------------------------------------------------------------------------
// POST /v1/completions

namespace {

ChatRun prepare_completion(const ServedModel& m, const CompletionRequest& r) {
  engine::GenerationParams g = generation_params(r.sampling);
  // A text prompt gets the model's BOS, as `herd run` gives it.
  g.prompt = r.prompt_text ? m.tokenizer->encode(*r.prompt_text, true, false) : r.prompt_tokens;
  if (g.prompt.empty())
    throw ApiError(400, "the prompt has no tokens", "invalid_request_error", "prompt");
  return {std::move(g), r.response_format.grammar, {}};
}

}  // namespace

void HttpServer::completions(const httplib::Request& req, httplib::Response& res,
                             const Current& cur) {
  const ServedModel& m = *cur.model;
  CompletionRequest r = parse_completion_request(req.body);
  check_model(r.sampling, m);
  auto [g, grammar, po] = prepare_completion(m, r);
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  std::shared_ptr<engine::RequestStream> stream = submit(cur, std::move(g), grammar, "prompt");
  ResponseHeader header{"cmpl-" + std::to_string(next_id_.fetch_add(1)), unix_now(), m.id};

  if (!r.sampling.stream) {
    Collected c = collect(*stream, req);
    if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
    json lp;
    if (r.sampling.top_logprobs >= 0) lp = completion_logprobs_json(*m.tokenizer, c.logprobs, 0);
    json answer = completion(header, c.text, c.finish, lp);
    if (r.sampling.herd_token_ids) answer["herd"] = herd_extension(c.tokens);
    send_json(res, 200, answer);
    return;
  }
  struct CompletionStream {
    std::shared_ptr<engine::RequestStream> stream;
    ResponseHeader header;
    const tokenizer::Tokenizer* tokenizer;
    bool logprobs;
    int64_t text_offset;
    bool include_usage;
    Clock::time_point last_write;
    std::unique_ptr<InFlight> in_flight;
    bool token_ids;
    std::vector<int32_t> tokens;
  };
  auto state = std::make_shared<CompletionStream>(CompletionStream{stream,
                                                                   header,
                                                                   m.tokenizer,
                                                                   r.sampling.top_logprobs >= 0,
                                                                   0,
                                                                   r.sampling.include_usage,
                                                                   Clock::now(),
                                                                   std::move(in_flight),
                                                                   r.sampling.herd_token_ids,
                                                                   {}});
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) {
        std::string out;
        engine::StreamUpdate u = state->stream->wait(kWaitSlice);
        if (state->token_ids) {
          state->tokens.insert(state->tokens.end(), u.tokens.begin(), u.tokens.end());
        }
        if (!u.text.empty() || (state->logprobs && !u.logprobs.empty())) {
          json lp;
          if (state->logprobs) {
            lp = completion_logprobs_json(*state->tokenizer, u.logprobs, state->text_offset);
          }
          out += sse_event(completion_chunk(state->header, u.text, nullptr, lp));
          state->text_offset += static_cast<int64_t>(u.text.size());
        }
        if (u.finish) {
          auto last = [&] {
            json chunk = completion_chunk(state->header, "", openai_finish_reason(*u.finish, false),
                                          nullptr);
            if (state->token_ids) chunk["herd"] = herd_extension(state->tokens);
            return chunk;
          };
          return finish_events(sink, out, *u.finish, last, state->header,
                               state->include_usage ? "text_completion" : nullptr);
        }
        return write_events(sink, out, *state->stream, state->last_write);
      },
      [state](bool success) {
        if (!success) state->stream->cancel();
        state->in_flight.reset();
      });
}

// ---------------------------------------------------------------------------------------
// POST /api/verify: a hub asks this pod to check tokens another pod served (docs/network.md)
//
//   {"endpoint": "chat" | "completions", "request": <the client's request body>,
//    "completion_token_ids": [the served tokens]}
// answers
//   {"prompt_tokens": n, "temperature": t (0: greedy), "text": the served tokens as text,
//    "content": the text an honest pod sends for them (verify_render.h),
//    "scores": [{"token": id, "probability": p, "gap": g, "entropy": h, "variance": v}, ...]}
// with each token's probability and gap as this pod's sampler would draw it with the
// request's sampling (engine::DrawCheck), all from one prefill of prompt and served tokens;
// or {"unscorable": why, "text": ...} for ids no honest pod serves (a failed check).
// The prompt is this pod's own rendering and tokenization of the request, not the server's.
// Requests held to a grammar (JSON schema, forced tool calls) cannot be checked this way: 422.

void HttpServer::verify(const httplib::Request& req, httplib::Response& res, const Current& cur) {
  const ServedModel& m = *cur.model;
  std::string problem;
  const json body = http::parse_bounded_json(req.body, &problem);
  if (body.is_discarded()) throw ApiError(400, "the body: " + problem, "invalid_request_error");
  if (!body.is_object()) {
    throw ApiError(400, "the body is not a JSON object", "invalid_request_error");
  }
  const std::string endpoint = body.value("endpoint", "");
  if (!body.contains("request") || !body["request"].is_object()) {
    throw ApiError(400, "'request' must be the served request's body", "invalid_request_error",
                   "request");
  }
  if (!body.contains("completion_token_ids") || !body["completion_token_ids"].is_array() ||
      body["completion_token_ids"].empty()) {
    throw ApiError(400, "'completion_token_ids' must be a non-empty array of token ids",
                   "invalid_request_error", "completion_token_ids");
  }
  std::vector<int32_t> served;
  for (const json& t : body["completion_token_ids"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX) {
      throw ApiError(400, "'completion_token_ids' holds " + t.dump(0).substr(0, 40) + ", not an id",
                     "invalid_request_error", "completion_token_ids");
    }
    served.push_back(t.get<int32_t>());
  }
  const std::string request = body["request"].dump();
  ChatRun run;
  std::optional<OutputParserOptions> parser;  // chat's: the content its parser gives
  if (endpoint == "chat") {
    ChatRequest r = parse_chat_request(request);
    check_model(r.sampling, m);
    run = prepare_chat(m, r, 0);
    parser = run.parser;
  } else if (endpoint == "completions") {
    CompletionRequest r = parse_completion_request(request);
    check_model(r.sampling, m);
    run = prepare_completion(m, r);
  } else {
    throw ApiError(400, "'endpoint' must be \"chat\" or \"completions\"", "invalid_request_error",
                   "endpoint");
  }
  if (run.grammar) {
    throw ApiError(422,
                   "a request held to a grammar (a JSON schema, a forced tool call) cannot "
                   "be checked token by token",
                   "invalid_request_error", "request", "unverifiable");
  }
  engine::GenerationParams& g = run.params;
  const auto n_prompt = static_cast<int64_t>(g.prompt.size());
  const std::string why = unscorable(
      ServedIds{&served, m.tokenizer->n_vocab(), g.max_tokens, n_prompt, cur.scheduler->n_ctx()});
  if (!why.empty()) return send_json(res, 200, {{"unscorable", why}});
  const float temperature = g.sampler.temperature;
  const std::string content = rendered_text(*m.tokenizer, g.render_special, g.stop, parser, served);
  g.score_from = n_prompt;
  g.prompt.insert(g.prompt.end(), served.begin(), served.end());
  g.max_tokens = 0;
  auto in_flight = std::make_unique<InFlight>(in_flight_);
  std::shared_ptr<engine::RequestStream> stream = submit(cur, std::move(g), nullptr, "request");
  Collected c = collect(*stream, req);
  if (c.finish.reason == engine::FinishReason::kError) throw generation_error(c.finish);
  if (c.scores.size() != served.size()) {
    throw ApiError(500,
                   "the check scored " + std::to_string(c.scores.size()) + " of " +
                       std::to_string(served.size()) + " tokens",
                   "server_error");
  }
  send_json(res, 200,
            {{"prompt_tokens", n_prompt},
             {"temperature", temperature},
             {"text", m.tokenizer->decode(served)},
             {"content", content},
             {"scores", scores_json(c.scores)}});
}

// ---------------------------------------------------------------------------------------
// POST /api/load {"model": NAME}: the serving command decides (set_load_handler); 404 when
// it did not set one (this server cannot load models).

void HttpServer::load(const httplib::Request& req, httplib::Response& res) {
  if (!load_handler_) {
    return send_error(res, ApiError(404,
                                    "this server loads no other model (herd serve "
                                    "--models-dir and --hub)",
                                    "invalid_request_error"));
  }
  const json body = http::parse_bounded_json(req.body);
  if (body.is_discarded() || !body.is_object() || !body.contains("model") ||
      !body["model"].is_string() || body["model"].get<std::string>().empty()) {
    return send_error(
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
  send_error(res, ApiError(a.status, a.message, type));
}

}  // namespace herd::server
