#include "hub/hub_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "http/bounded_json.h"
#include "http/guarded_server.h"
#include "hub/answer_limits.h"
#include "hub/answer_reader.h"
#include "hub/billing.h"
#include "hub/client_api.h"
#include "hub/hub_keys.h"
#include "hub/hub_page.h"
#include "hub/ledger.h"
#include "hub/loads.h"
#include "hub/network_view.h"
#include "hub/pod_clients.h"
#include "hub/pod_table.h"
#include "hub/rate_limit.h"
#include "hub/registrar.h"
#include "hub/registration.h"
#include "hub/router.h"
#include "hub/verifier.h"
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

// The hub's own server (every request within o.http_limits: http/guarded_server.h): plain
// HTTP, or HTTPS with the certificate and key given.
std::unique_ptr<http::GuardedServer> make_server(const HubOptions& o) {
  auto server = std::make_unique<http::GuardedServer>(o.http_limits);
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    throw Error("hub", "TLS needs both a certificate and its private key");
  }
  if (!o.tls_cert.empty()) server->use_tls(o.tls_cert, o.tls_key);
  return server;
}

// How many pods a request is tried on before the client gets an error.
constexpr int kAttempts = 3;
// A round trip's answer: as long as the connection may take.
constexpr std::chrono::seconds kProbeDeadline{2};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The client's request as a checker replays it: without what the hub added or streaming.
json replayable(json body) {
  body.erase("stream");
  body.erase("stream_options");
  body.erase("herd_token_ids");
  return body;
}

}  // namespace

// The hub's rooms (pod_table.h, verifier.h, loads.h, network_view.h, pod_clients.h), each
// with its own lock, and the routing of requests between them, which is this file's.
struct HubServer::State {
  State(HubOptions o, Ledger& ledger, PodRecords* records, std::mt19937_64 rng)
      : options(std::move(o)),
        keys(options.secret, options.api_keys, options.operator_keys),
        credits(ledger, options.prices),
        server(make_server(options)),
        http(*server),
        rate_limit(options.requests_per_minute),
        replica(std::to_string(unix_ms()) + "-" + std::to_string(rng() % 1000000)),
        pod_clients(options.pod_ca_file),
        pods(options.trusted_pods, records),
        verifier({options.check_rate, options.thresholds}, rng, pods, pod_clients, credits),
        loads(options.demand, pods, pod_clients),
        registrar({options.allow_private_pods, options.new_pods_per_minute,
                   options.max_clock_skew_ms, options.heartbeat.count()},
                  pods, loads, credits),
        view(options.prices, replica, pods, verifier, loads, credits) {}

  using Chosen = ChosenPod;

  HubOptions options;
  HubKeys keys;
  Credits credits;
  std::unique_ptr<http::GuardedServer> server;  // HTTP or HTTPS
  http::GuardedServer& http;
  RateLimit rate_limit;
  int port = 0;
  const std::string replica;  // names this hub's request ids
  std::atomic<uint64_t> next_request{0};

  PodClients pod_clients;
  PodTable pods;
  Verifier verifier;
  Loads loads;
  Registrar registrar;
  NetworkView view;

  std::mutex stop_mutex;  // guards stopping
  bool stopping = false;
  std::condition_variable stop_changed;

  // The client's account ("client:open" on a hub without keys); nullopt without a valid key.
  // The key as a bearer token, or in Anthropic's x-api-key header.
  std::optional<std::string> client_account(const httplib::Request& req) const {
    if (!req.has_header("Authorization") && req.has_header("x-api-key")) {
      return keys.client_account("Bearer " + req.get_header_value("x-api-key"));
    }
    return keys.client_account(req.get_header_value("Authorization"));
  }
  bool authorized(const httplib::Request& req) const { return client_account(req).has_value(); }

  void register_pod(const httplib::Request& req, httplib::Response& res) {
    const Registrar::Answer a = registrar.register_pod(
        req.body, req.get_header_value("X-Herd-Signature"), req.remote_addr, unix_ms());
    if (a.status == 200) return send_json(res, 200, a.body);
    if (a.retry_after_seconds > 0) {
      res.set_header("Retry-After", std::to_string(a.retry_after_seconds));
    }
    send_error(res, a.status, a.type, a.message);
  }

  // GET /api/ledger: the ledger's problems and every account's balance, read at once (so
  // they sum to zero); with ?account=NAME, that account's history (the audit trail).
  json ledger_view(const std::string& account = "") const {
    if (!account.empty()) {
      json rows = json::array();
      for (const HistoryRow& r : credits.history(account)) {
        rows.push_back({{"entry", r.entry_id},
                        {"transfer", r.transfer},
                        {"memo", r.memo},
                        {"amount", r.amount},
                        {"balance_after", r.balance_after}});
      }
      return {{"account", account}, {"history", rows}};
    }
    json balances = json::object();
    int64_t sum = 0;
    for (const AccountBalance& a : credits.accounts()) {
      balances[a.name] = a.balance;
      sum += a.balance;
    }
    return {{"problems", credits.verify()}, {"balances", balances}, {"sum", sum}};
  }

  void expire() {
    for (const std::string& id : pods.expire(options.pod_timeout, Clock::now())) {
      loads.pod_dropped(id);
    }
    registrar.expire(unix_ms());
  }

  // A pod for the request that none of `tried` is, marked started; nullopt when none.
  // `trusted_first`: after an answer failed its check, untrusted pods only when no trusted
  // one can take the request (a request meets one cheater at most, as a rule).
  std::optional<Chosen> choose(const std::string& model, int64_t prompt_tokens, int64_t max_tokens,
                               const std::vector<PodId>& tried, bool trusted_first) {
    std::vector<PodId> exclude = loads.loading_pods();  // they answer 503 while loading
    exclude.insert(exclude.end(), tried.begin(), tried.end());
    // On probation: a pod that never passed a check gets nothing more while one of its
    // answers is being checked (unless no other pod can take the request), so a cheater
    // serves little more than the requests it was sent at once before its first verdict.
    std::vector<std::string> wary = verifier.probation();
    if (trusted_first) {
      for (const LivePod& pod : pods.live()) {
        if (!pod.record.trusted()) wary.push_back(pod.id);
      }
    }
    return pods.choose(model, prompt_tokens, max_tokens, exclude, wary);
  }

  // One client request as it goes through the hub.
  struct Call {
    const ClientApi* api = nullptr;  // the API the client speaks (client_api.h)
    std::string request_id, client, model_name, endpoint, path;
    json body;            // the client's
    std::string forward;  // what the pods get: the body and herd_token_ids (and usage)
    int64_t prompt_tokens = 0, max_tokens = 0;
    int64_t max_tokens_given = -1;  // the client's max_tokens (-1: none; bounds the bill)
    bool stream = false, client_wants_usage = false;
    Clock::time_point started;
  };

  static int64_t context_of(const LivePod& pod, const std::string& model) {
    for (const ServedModel& m : pod.registration.models) {
      if (m.name == model) return m.n_ctx;
    }
    return 0;
  }

  // What the hub reads of the chosen pod's answer (answer_limits.h), and the most ids.
  AnswerLimits limits_of(const Call& call, const Chosen& chosen, size_t& max_ids) {
    const auto live = pods.find(chosen.node);
    const int64_t n_ctx = live ? context_of(*live, call.model_name) : 0;
    max_ids = static_cast<size_t>(answer_token_bound(call.max_tokens_given, n_ctx));
    return completion_answer_limits(call.body, call.max_tokens_given, call.prompt_tokens, n_ctx);
  }

  // A pod answered past its answer's byte cap: a fault, as billing's are (billing.h), so it
  // fails the pod's check without asking a checker (reputation and pending credits go).
  void answered_over_limit(const Call& call, const Chosen& chosen, const std::string& failure) {
    Served s = answer_of(call, chosen, AnswerFacts());
    s.fault = failure + " (request " + call.request_id + ")";
    verifier.check_now(s);
  }

  // A pod's whole answer as the books and the checks see it.
  Served answer_of(const Call& call, const Chosen& chosen, const AnswerFacts& facts) {
    Served s;
    s.request_id = call.request_id;
    s.client = call.client;
    s.model = call.model_name;
    s.endpoint = call.endpoint;
    s.body = replayable(call.body);
    s.token_ids = facts.token_ids;
    s.text = facts.text;
    s.pod_id = chosen.node;
    int64_t n_ctx = 0;  // the model's context as the pod registered it
    if (const auto live = pods.find(chosen.node)) {
      s.pod_name = live->registration.name;
      n_ctx = context_of(*live, call.model_name);
    }
    // What the pod says it used, within what it can have used (billing.h): a pod cannot
    // bill a client for tokens it made up, and what no honest pod answers is a fault.
    const Billed billed =
        bill(facts, static_cast<int64_t>(call.forward.size()),
             call.max_tokens_given >= 0 ? call.max_tokens_given : INT64_MAX, n_ctx);
    s.prompt_tokens = billed.prompt_tokens;
    s.completion_tokens = billed.completion_tokens;
    s.fault = billed.fault;
    s.seconds = seconds_since(call.started);
    s.charge = price_of(options.prices, s.prompt_tokens, s.completion_tokens);
    return s;
  }

  // After a pod's answer went to the client: the books, the counts, and maybe a check
  // (`checked`: it was checked before it went, with this outcome).
  void served(Served s, Outcome checked = Outcome::NONE) {
    std::string status = "ok";
    if (!s.pod_id.empty()) {
      try {
        credits.charge(s.request_id, s.client, s.pod_id, s.charge,
                       s.model + ": " + std::to_string(s.prompt_tokens) + " + " +
                           std::to_string(s.completion_tokens) + " tokens");
      } catch (const Error&) {
        status = "unpaid";  // the client's credits ran out meanwhile (concurrent requests)
      }
      if (checked == Outcome::PASSED && status == "ok") {
        try {
          credits.verified(s.request_id, s.pod_id, s.charge.pod_earns);
        } catch (const Error&) {
        }
      }
    }
    view.request_served(s, status);
    if (s.pod_id.empty()) return;
    pods.count_served(s.pod_id, s.completion_tokens, s.seconds);
    verifier.consider(std::move(s), checked);
  }

  // POST to a client API's path (client_api.h): the whole request to one pod, chosen by the
  // router; tried on another (up to kAttempts) when a pod fails before its first byte of
  // answer. A streamed answer is passed on as it comes. Charged once whole. Errors in the
  // API's shape.
  void complete(const ClientApi& api, const httplib::Request& req, httplib::Response& res) {
    auto fail = [&](httplib::Response& r, int status, const std::string& type,
                    const std::string& message) {
      send_json(r, status, error_body(api, status, type, message));
    };
    const std::optional<std::string> account = client_account(req);
    if (!account) {
      return fail(res, 401, "authentication_error", "a valid API key is required");
    }
    // Per key; on a hub without keys, per client address.
    const double wait = rate_limit.take(keys.open() ? "address:" + req.remote_addr : *account);
    if (wait > 0) {
      res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(wait))));
      return fail(res, 429, "rate_limit_error",
                  "too many requests for this key: " + std::to_string(options.requests_per_minute) +
                      " a minute; retry in " +
                      std::to_string(static_cast<int64_t>(std::ceil(wait))) + " s");
    }
    Call call;
    call.body = http::parse_bounded_json(req.body);
    if (call.body.is_discarded() || !call.body.is_object()) {
      return fail(res, 400, "invalid_request_error", "the body is not a JSON object");
    }
    const json& body = call.body;
    if (!body.contains("model") || !body["model"].is_string()) {
      return fail(res, 400, "invalid_request_error", "field 'model': a string is required");
    }
    if (const std::string why = refusal(api, body); !why.empty()) {
      return fail(res, 400, "invalid_request_error", why);
    }
    call.api = &api;
    call.model_name = body["model"].get<std::string>();
    call.max_tokens_given = max_tokens_given(api, body);
    call.max_tokens = call.max_tokens_given > 0
                          ? std::min<int64_t>(call.max_tokens_given, int64_t{1} << 20)
                          : 256;
    // Four bytes a token, roughly: the hub does not tokenize.
    call.prompt_tokens = static_cast<int64_t>(req.body.size() / 4) + 1;
    call.client = *account;
    call.path = req.path;
    call.endpoint = api.endpoint;
    call.stream = wants_stream(api, body);
    // OpenAI's streams carry usage only when asked: the hub asks, and drops it for a client
    // that did not. The other APIs' streams always carry theirs.
    const bool openai = api.format == AnswerFormat::kOpenAI;
    call.client_wants_usage = !openai;
    if (call.stream && openai) {
      const json& o = body.contains("stream_options") ? body["stream_options"] : json();
      call.client_wants_usage = o.is_object() && o.value("include_usage", false) == true;
    }
    json forward = body;
    forward["herd_token_ids"] = true;
    if (call.stream && openai) forward["stream_options"] = {{"include_usage", true}};
    call.forward = forward.dump();
    // Ollama's clients name a model "name:latest"; pods register it as "name" (and answer
    // to both).
    constexpr std::string_view kLatest = ":latest";
    if (api.format == AnswerFormat::kOllama && call.model_name.ends_with(kLatest) &&
        !pods.model(call.model_name)) {
      call.model_name.resize(call.model_name.size() - kLatest.size());
    }
    const bool known = pods.model(call.model_name).has_value();
    // No live pod serves it: counted as demand, maybe loaded (else answered as before).
    if (!known || pods.serving(call.model_name) == 0) {
      if (const auto message = loads.answer_unserved(call.model_name)) {
        res.set_header("Retry-After", std::to_string(kLoadRetryAfterSeconds));
        return fail(res, 503, "server_error", *message);
      }
    }
    if (!known) {
      return fail(res, 404, "invalid_request_error",
                  "model '" + call.model_name + "' is not served by any pod");
    }
    const Charge most = price_of(options.prices, call.prompt_tokens, call.max_tokens);
    try {
      if (!credits.can_pay(call.client, most.client_pays)) {
        return fail(res, 402, "insufficient_quota",
                    "this key's credits (" + std::to_string(credits.balance(call.client)) +
                        ") do not cover the request's most (" + std::to_string(most.client_pays) +
                        "): lower max_tokens");
      }
    } catch (const Error& e) {
      return fail(res, 503, "server_error", e.what());
    }
    call.request_id = replica + "-" + std::to_string(++next_request);
    view.request_started();
    call.started = Clock::now();
    if (call.stream) return complete_streamed(std::move(call), res);
    std::string failure;
    const bool answered = try_pods(call, failure, [&](const Chosen& chosen, std::string& why) {
      return answer_whole(call, chosen, res, why);
    });
    if (answered) return;
    view.request_failed(call.model_name);
    fail(res, 503, "server_error", no_answer(call, failure));
  }

  // What a request came to on one pod (CAUGHT: its answer failed a check, or could not be
  // checked; not sent).
  enum class Attempt { ANSWERED, FAILED, CAUGHT };

  // Sends the request to the pods the router chooses, one after another (up to kAttempts),
  // until one answers. `attempt` talks to the chosen pod, tells the router when it is done
  // with it (finished()) and, on FAILED, says why in its last argument. False when no pod
  // answered, with the last reason in `failure`.
  bool try_pods(const Call& call, std::string& failure,
                const std::function<Attempt(const Chosen&, std::string&)>& attempt) {
    failure = "no pod serves it now";
    std::vector<PodId> tried;
    bool trusted_first = false;
    for (int n = 0; n < kAttempts; ++n) {
      const auto chosen =
          choose(call.model_name, call.prompt_tokens, call.max_tokens, tried, trusted_first);
      if (!chosen) break;
      tried.push_back(chosen->pod);
      const Attempt came = attempt(*chosen, failure);
      if (came == Attempt::ANSWERED) return true;
      trusted_first = trusted_first || came == Attempt::CAUGHT;
    }
    return false;
  }

  static std::string no_answer(const Call& call, const std::string& failure) {
    return "no pod could answer for model '" + call.model_name + "': " + failure;
  }

  // An untrusted pod's whole answer is checked before it is sent (Verifier::check_now); FAILED,
  // UNANSWERED or INCONCLUSIVE: it is not the client's (not_sent), and `why` says so.
  Outcome check_before_sending(const Call& call, const Chosen& chosen, const AnswerFacts& facts,
                               std::string& why) {
    const Outcome checked = verifier.check_now(answer_of(call, chosen, facts));
    if (checked == Outcome::FAILED) why = "its answer failed a check";
    if (checked == Outcome::UNANSWERED) why = "no checker answered for its answer";
    if (checked == Outcome::INCONCLUSIVE) why = "its answer was too short to prove it honest";
    return checked;
  }
  static bool not_sent(Outcome checked) {
    return checked == Outcome::FAILED || checked == Outcome::UNANSWERED ||
           checked == Outcome::INCONCLUSIVE;
  }

  // One pod's whole (not streamed) answer, passed on as it came but for herd's extension.
  Attempt answer_whole(const Call& call, const Chosen& chosen, httplib::Response& res,
                       std::string& why) {
    size_t max_ids = 0;
    const AnswerLimits limits = limits_of(call, chosen, max_ids);
    PodAnswer answer = pod_clients.post(chosen.address, call.path, call.forward, limits);
    pods.finished(chosen);
    if (answer.over_limit) answered_over_limit(call, chosen, answer.failure);
    if (!answer.answered() || answer.status >= 500) {
      why = answer.answered() ? "it answered " + std::to_string(answer.status) : answer.failure;
      return Attempt::FAILED;
    }
    AnswerFacts facts;
    std::string body = read_answer(answer.body, facts, max_ids, call.api->format);
    answer.body.clear();
    const bool whole = answer.status == 200 && facts.completion_tokens.has_value();
    Outcome checked = Outcome::NONE;
    if (whole && verifier.untrusted(chosen.node)) {
      checked = check_before_sending(call, chosen, facts, why);
      // Not for the client: another pod answers, and only that is charged.
      if (not_sent(checked)) return Attempt::CAUGHT;
    }
    res.status = answer.status;
    res.set_content(std::move(body),
                    answer.content_type.empty() ? "application/json" : answer.content_type);
    res.set_header("X-Herd-Pod", chosen.url);
    if (whole) {
      served(answer_of(call, chosen, facts), checked);
    } else {
      view.request_failed(call.model_name);  // the pod refused the request: not charged
    }
    return Attempt::ANSWERED;
  }

  void complete_streamed(Call call, httplib::Response& res) {
    const char* content_type = stream_content_type(*call.api);
    res.set_chunked_content_provider(content_type, [this, call = std::move(call)](
                                                       size_t, httplib::DataSink& sink) {
      // Runs after the route returned, where httplib catches nothing: what it throws
      // ends this connection, not the hub.
      try {
        std::string failure;
        const bool answered = try_pods(call, failure, [&](const Chosen& chosen, std::string& why) {
          return answer_streamed(call, chosen, sink, why);
        });
        if (!answered) {
          view.request_failed(call.model_name);
          const std::string event = stream_error(*call.api, no_answer(call, failure));
          sink.write(event.data(), event.size());
        }
        sink.done();
        return true;
      } catch (const std::exception&) {
        return false;
      }
    });
  }

  // One pod's streamed answer, passed on to the client as it comes (an untrusted pod's held
  // until its check). FAILED only before anything was sent: once the client has part of an
  // answer it is too late to try another pod.
  Attempt answer_streamed(const Call& call, const Chosen& chosen, httplib::DataSink& sink,
                          std::string& why) {
    bool wrote = false, failed = false, client_gone = false;
    size_t max_ids = 0;
    const AnswerLimits limits = limits_of(call, chosen, max_ids);
    StreamReader reader(call.client_wants_usage, max_ids, call.api->format);
    const bool hold = verifier.untrusted(chosen.node);
    // From the event that finishes the answer on, the bytes wait for the charge: a client
    // never holds a finished answer that a replica killed at that moment had not charged.
    std::string held, tail;
    auto send = [&](const std::string& out) {
      if (out.empty() || client_gone) return;
      if (reader.facts().finished) {
        tail += out;
        return;
      }
      if (hold) {
        held += out;
        return;
      }
      wrote = true;
      if (!sink.write(out.data(), out.size())) client_gone = true;
    };
    httplib::Request forward;
    forward.method = "POST";
    forward.path = call.path;
    forward.body = call.forward;
    forward.set_header("Content-Type", "application/json");
    forward.response_handler = [&](const httplib::Response& r) { return r.status < 500; };
    forward.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      send(reader.feed({data, n}));
      return !client_gone;
    };
    // What the pod sent past its cap is not the client's: the reader keeps what came before.
    const PodAnswer answer = pod_clients.send(chosen.address, std::move(forward), limits);
    if (!answer.answered() && !client_gone) {
      failed = true;
      why = answer.failure;
      if (answer.over_limit) answered_over_limit(call, chosen, answer.failure);
    }
    send(reader.flush());
    pods.finished(chosen);
    const AnswerFacts& facts = reader.facts();
    const bool whole = !failed && !client_gone && facts.finished && facts.completion_tokens;
    Outcome checked = Outcome::NONE;
    if (hold && !failed) {
      if (whole) checked = check_before_sending(call, chosen, facts, why);
      if (not_sent(checked)) return Attempt::CAUGHT;  // never sent
      wrote = !held.empty();
      if (wrote && !sink.write(held.data(), held.size())) client_gone = true;
    }
    if (!wrote && failed) return Attempt::FAILED;  // nothing sent: another pod may answer
    // Charged only when the answer was whole: it finished and the pod said what it used.
    if (whole && !client_gone) {
      served(answer_of(call, chosen, facts), checked);
    } else {
      view.request_failed(call.model_name);
    }
    if (!tail.empty() && !client_gone) sink.write(tail.data(), tail.size());
    return Attempt::ANSWERED;
  }

  // ---- the hub's round trips to its pods, and settling ----

  // A round trip counts only when the pod answers as herd does (a JSON object with a
  // "status"): the public view must not tell whether some other service listens there.
  void probe_round_trips() {
    for (const LivePod& pod : pods.live()) {
      const auto start = Clock::now();
      const PodAnswer r =
          pod_clients.get(pod.address, "/health", {kSmallAnswer.max_bytes, kProbeDeadline}, 2);
      if (!r.answered()) continue;
      const double rtt = seconds_since(start);
      const json health = http::parse_bounded_json(r.body);
      if (!health.is_object() || !health.contains("status") || !health["status"].is_string()) {
        continue;
      }
      pods.set_rtt(pod.id, rtt);
    }
  }

  // Pays what is pending of the pods in good standing (never failed a check).
  void settle() {
    try {
      credits.settle(pods.good_pods(), replica + "-" + std::to_string(unix_ms()));
    } catch (const Error&) {
    }
  }

  void routes() {
    for (const ClientApi& api : client_apis()) {
      http.Post(api.path, [this, &api](const httplib::Request& req, httplib::Response& res) {
        complete(api, req, res);
      });
    }
    http.Post("/api/register", [this](const httplib::Request& req, httplib::Response& res) {
      register_pod(req, res);
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) {
        return send_error(res, 401, "authentication_error", "a valid API key is required");
      }
      send_json(res, 200, view.model_list());
    });
    http.Get("/api/network", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, view.network());
    });
    http.Get("/api/ledger", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string account = req.get_param_value("account");
      if (const auto no = keys.ledger_refusal(req.get_header_value("Authorization"), account)) {
        return send_error(res, no->status, "authentication_error", no->message);
      }
      try {
        send_json(res, 200, ledger_view(account));
      } catch (const Error& e) {
        send_error(res, 503, "server_error", e.what());
      }
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, {{"status", "ok"}, {"pods", pods.size()}});
    });
    serve_hub_page(http);
  }
};

HubServer::HubServer(HubOptions options, Ledger& ledger, PodRecords* records) {
  const uint64_t seed = options.seed != 0 ? options.seed : std::random_device{}();
  state_ = std::make_unique<State>(std::move(options), ledger, records, std::mt19937_64(seed));
  State& s = *state_;
  if (s.options.check_rate < 0 || s.options.check_rate > 1) {
    throw Error("hub", "the check rate must be within [0, 1]");
  }
  for (const std::string& account : s.keys.accounts()) {
    s.credits.grant(account, s.options.grant_credits);
  }
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
  // Expiry every second and settling every period; round trips every heartbeat, on their
  // own thread (a dead pod takes seconds to time out); checks on theirs.
  std::thread sweeper([&s] {
    auto settled = Clock::now();
    std::unique_lock<std::mutex> lock(s.stop_mutex);
    while (!s.stopping) {
      s.stop_changed.wait_for(lock, std::chrono::seconds(1));
      lock.unlock();
      try {
        s.expire();
        if (Clock::now() - settled >= s.options.settle_period) {
          settled = Clock::now();
          s.settle();
        }
      } catch (const std::exception&) {
        // Out of memory at worst: the next second tries again; the hub stays up.
      }
      lock.lock();
    }
  });
  std::thread prober([&s] {
    std::unique_lock<std::mutex> lock(s.stop_mutex);
    while (!s.stopping) {
      lock.unlock();
      try {
        s.probe_round_trips();
      } catch (const std::exception&) {
        // A round trip not measured this heartbeat: the next one tries again.
      }
      lock.lock();
      s.stop_changed.wait_for(lock, s.options.heartbeat);
    }
  });
  std::thread checker([&s] { s.verifier.run(); });
  s.http.listen_after_bind();
  {
    std::lock_guard<std::mutex> lock(s.stop_mutex);
    s.stopping = true;
  }
  s.stop_changed.notify_all();
  s.verifier.stop();
  sweeper.join();
  prober.join();
  checker.join();
}

void HubServer::stop() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.stop_mutex);
    s.stopping = true;
  }
  s.stop_changed.notify_all();
  s.verifier.stop();
  s.http.stop();
}

json HubServer::network() const {
  return state_->view.network();
}

void HubServer::expire_silent_pods() {
  state_->expire();
}

json HubServer::ledger() const {
  return state_->ledger_view();
}

bool HubServer::wait_checks(std::chrono::milliseconds timeout) {
  return state_->verifier.wait_idle(timeout);
}

}  // namespace herd::hub
