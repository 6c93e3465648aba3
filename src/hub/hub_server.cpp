#include "hub/hub_server.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "hub/answer_reader.h"
#include "hub/hub_page.h"
#include "hub/ledger.h"
#include "hub/rate_limit.h"
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

// A client for a pod's API at `url` (http:// or https://, as its registration says; https
// checked against the system's certificate authorities or `ca_file`); nullptr when the URL is
// not one httplib can reach (or https without TLS in this build).
std::unique_ptr<httplib::Client> pod_client(const std::string& url, const std::string& ca_file,
                                            time_t read_seconds) {
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  auto client = std::make_unique<httplib::Client>(base);
  if (!client->is_valid()) return nullptr;
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  if (!ca_file.empty()) client->set_ca_cert_path(ca_file.c_str());
#endif
  client->set_connection_timeout(5);
  client->set_read_timeout(read_seconds);
  return client;
}

// The hub's own server: plain HTTP, or HTTPS with the certificate and key given.
std::unique_ptr<httplib::Server> make_server(const HubOptions& o) {
  if (o.tls_cert.empty() && o.tls_key.empty()) return std::make_unique<httplib::Server>();
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    throw Error("hub", "TLS needs both a certificate and its private key");
  }
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
  auto server = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
  if (!server->is_valid()) {
    throw Error("hub", "TLS: cannot serve with certificate '" + o.tls_cert + "' and key '" +
                           o.tls_key + "' (unreadable, not PEM, or not a pair)");
  }
  return server;
#else
  throw Error("hub", "TLS: this herd was built without it (cpp-httplib without OpenSSL)");
#endif
}

// How many pods a request is tried on before the client gets an error.
constexpr int kAttempts = 3;
// Checks waiting for the worker; more are dropped (counted as skipped).
constexpr size_t kMaxQueuedChecks = 256;

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

struct HubServer::State {
  State(HubOptions o, Ledger& ledger)
      : options(std::move(o)),
        credits(ledger, options.prices),
        server(make_server(options)),
        http(*server),
        rate_limit(options.requests_per_minute),
        demand(options.demand),
        rng(options.seed != 0 ? options.seed : std::random_device{}()),
        replica(std::to_string(unix_ms()) + "-" + std::to_string(rng() % 1000000)) {}

  struct Pod {
    PodId id = 0;
    Registration registration;
    Clock::time_point first_seen, last_seen;
  };
  // What the hub knows of a pod beyond its registration; kept after it leaves.
  struct Record {
    double reputation = kNewReputation;
    double rtt_seconds = 0;
    int64_t requests = 0, tokens = 0;
    int64_t checked = 0, passed = 0, failed = 0;
    int64_t checks_pending = 0;  // queued or running
    std::string last_failure;
  };
  enum class Outcome { NONE, PASSED, FAILED };  // of a check (NONE: none could be made)
  // A served request, as the checks and the books need it.
  struct Served {
    std::string request_id, client, pod_id, pod_name, model, endpoint;
    json body;
    std::vector<int32_t> token_ids;
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double seconds = 0;
    Charge charge;
  };

  HubOptions options;
  Credits credits;
  std::unique_ptr<httplib::Server> server;  // HTTP or HTTPS
  httplib::Server& http;
  RateLimit rate_limit;
  int port = 0;

  mutable std::mutex mutex;  // guards what follows
  Router router;
  std::map<std::string, Pod> pods;        // by node id text
  std::map<std::string, Record> records;  // by node id text, every pod ever seen
  std::unordered_map<PodId, std::string> node_of;  // the live pods' node ids
  std::set<std::string> probation;                 // pods never checked good, with a check to come
  std::map<std::string, ModelId> models;  // model name -> the router's id
  std::set<std::string> clients;          // accounts of the keys
  Demand demand;                          // for models no pod serves, and loads
  std::mt19937_64 rng;
  std::string replica;  // names this hub's request ids
  uint64_t next_request = 0;
  struct Totals {
    int64_t requests = 0, active = 0, failed = 0, tokens = 0, prompt_tokens = 0, unpaid = 0;
    int64_t checks = 0, checks_failed = 0, checks_skipped = 0, check_errors = 0;
    int64_t disagreements = 0;
    // The least plausible tokens of passed checks, and the share of implausible tokens in
    // failed ones (docs/network.md sets the thresholds from these).
    double passed_min_probability = 1, passed_max_gap = 0, passed_min_z = 0;
    int64_t failed_tokens = 0, failed_implausible = 0;
  } totals;
  std::deque<json> recent;  // the last kRecent requests, newest last
  std::deque<Served> checks;
  int64_t checks_running = 0;
  std::condition_variable checks_changed;
  bool stopping = false;
  std::condition_variable stop_changed;

  ModelId model_id(const std::string& name) {
    const auto [it, added] = models.emplace(name, static_cast<ModelId>(models.size()));
    return it->second;
  }

  // The client's API key ("" on a hub without keys), or nullopt when it has none valid.
  std::optional<std::string> client_key(const httplib::Request& req) const {
    if (options.api_keys.empty()) return std::string();
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (header.rfind(prefix, 0) != 0) return std::nullopt;
    const std::string key = header.substr(prefix.size());
    if (std::find(options.api_keys.begin(), options.api_keys.end(), key) ==
        options.api_keys.end()) {
      return std::nullopt;
    }
    return key;
  }
  bool authorized(const httplib::Request& req) const { return client_key(req).has_value(); }

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
    std::string token;
    try {
      credits.open_pod(id);
    } catch (const Error& e) {
      return send_error(res, 503, "server_error", e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const ServedModel& m : r.models) report.models.push_back(model_id(m.name));
      const auto now = Clock::now();
      auto it = pods.find(id);
      if (it == pods.end()) {
        const Record& record = records[id];
        Pod pod;
        pod.id = router.add(report, record.rtt_seconds, record.reputation);
        node_of[pod.id] = id;
        pod.first_seen = now;
        it = pods.emplace(id, std::move(pod)).first;
      } else {
        router.update(it->second.id, report);
      }
      token = pod_loads(id, r);
      it->second.registration = std::move(r);
      it->second.last_seen = now;
    }
    send_json(
        res, 200,
        {{"pod", id}, {"heartbeat_seconds", options.heartbeat.count()}, {"control_token", token}});
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
    add_loadable_models(data, served);
    return {{"object", "list"}, {"data", data}};
  }

  json network() const {
    json out = {{"pods", json::array()}, {"recent", json::array()}};
    std::vector<std::string> ids;
    {
      std::lock_guard<std::mutex> lock(mutex);
      const auto now = Clock::now();
      for (const auto& [id, pod] : pods) {
        const Registration& r = pod.registration;
        const Record& rec = records.at(id);
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
             {"last_seen_seconds", std::chrono::duration<double>(now - pod.last_seen).count()},
             {"rtt_ms", rec.rtt_seconds * 1e3},
             {"reputation", rec.reputation},
             {"flagged", rec.reputation < kMinReputation},
             {"requests", rec.requests},
             {"tokens_served", rec.tokens},
             {"checked", rec.checked},
             {"verified", rec.passed},
             {"failed_verifications", rec.failed},
             {"last_failure", rec.last_failure}});
        add_pod_loads(out["pods"].back(), id);
        ids.push_back(id);
      }
      for (const json& r : recent) out["recent"].push_back(r);
      out["loads"] = demand.view(now);
      out["hub"] = {{"replica", replica},
                    {"requests",
                     {{"total", totals.requests},
                      {"active", totals.active},
                      {"failed", totals.failed},
                      {"tokens", totals.tokens},
                      {"prompt_tokens", totals.prompt_tokens},
                      {"unpaid", totals.unpaid}}},
                    {"verification",
                     {{"checked", totals.checks},
                      {"failed", totals.checks_failed},
                      {"skipped", totals.checks_skipped},
                      {"errors", totals.check_errors},
                      {"disagreements", totals.disagreements},
                      {"passed_min_probability", totals.passed_min_probability},
                      {"passed_max_gap", totals.passed_max_gap},
                      {"passed_min_z", totals.passed_min_z},
                      {"failed_tokens", totals.failed_tokens},
                      {"failed_implausible", totals.failed_implausible},
                      {"queued", checks.size()},
                      {"sample_rate", options.check_rate},
                      {"always_checked", kAlwaysChecked},
                      {"min_probability", options.thresholds.min_probability},
                      {"greedy_gap", options.thresholds.greedy_gap},
                      {"min_z", options.thresholds.min_z}}},
                    {"prices",
                     {{"prompt_token", options.prices.prompt_token},
                      {"completion_token", options.prices.completion_token},
                      {"fee_percent", options.prices.fee_percent}}}};
    }
    // Balances outside the lock: the ledger has its own.
    for (size_t i = 0; i < ids.size(); ++i) {
      json& pod = out["pods"][i];
      try {
        pod["credits_earned"] = credits.balance(Credits::pod_account(ids[i]));
        pod["credits_pending"] = credits.balance(Credits::pending_account(ids[i]));
      } catch (const Error&) {
        pod["credits_earned"] = pod["credits_pending"] = nullptr;
      }
    }
    return out;
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
    std::lock_guard<std::mutex> lock(mutex);
    const auto now = Clock::now();
    for (auto it = pods.begin(); it != pods.end();) {
      if (now - it->second.last_seen > options.pod_timeout) {
        router.remove(it->second.id);
        node_of.erase(it->second.id);
        demand.pod_dropped(it->first);
        it = pods.erase(it);
      } else {
        ++it;
      }
    }
  }

  // A pod chosen for a request: its router id (reused once it leaves), node id and URL.
  struct Chosen {
    PodId pod = 0;
    std::string node, url;
  };

  // A pod for the request that none of `tried` is, marked started; nullopt when none.
  std::optional<Chosen> choose(ModelId model, int64_t prompt_tokens, int64_t max_tokens,
                               const std::vector<PodId>& tried) {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<PodId> exclude = demand.loading_pods();  // they answer 503 while loading
    exclude.insert(exclude.end(), tried.begin(), tried.end());
    // On probation: a pod that never passed a check gets nothing more while one of its
    // answers is being checked (unless no other pod can take the request), so a cheater
    // serves little more than the requests it was sent at once before its first verdict.
    std::vector<PodId> wary = exclude;
    for (const std::string& node : probation) {
      const auto live = pods.find(node);
      if (live != pods.end()) wary.push_back(live->second.id);
    }
    std::optional<PodId> pod = router.route(RouteRequest{model, prompt_tokens, max_tokens, wary});
    if (!pod) pod = router.route(RouteRequest{model, prompt_tokens, max_tokens, exclude});
    if (!pod) return std::nullopt;
    const auto it = node_of.find(*pod);
    if (it == node_of.end()) return std::nullopt;
    router.started(*pod);
    return Chosen{*pod, it->second, pods.at(it->second).registration.url};
  }

  // The request on `chosen` ended: it counts no more (unless the pod left meanwhile and its
  // router id went to another).
  void finished(const Chosen& chosen) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = node_of.find(chosen.pod);
    if (it != node_of.end() && it->second == chosen.node) router.finished(chosen.pod);
  }

  // One client request as it goes through the hub.
  struct Call {
    std::string request_id, client, model_name, endpoint, path;
    json body;            // the client's
    std::string forward;  // what the pods get: the body and herd_token_ids (and usage)
    ModelId model = 0;
    int64_t prompt_tokens = 0, max_tokens = 0;
    bool stream = false, client_wants_usage = false;
    Clock::time_point started;
  };

  // A pod's whole answer as the books and the checks see it.
  Served answer_of(const Call& call, const Chosen& chosen, const AnswerFacts& facts) {
    Served s;
    s.request_id = call.request_id;
    s.client = call.client;
    s.model = call.model_name;
    s.endpoint = call.endpoint;
    s.body = replayable(call.body);
    s.token_ids = facts.token_ids;
    // What the pod says it used, within what it can have used: no more prompt tokens than
    // the request has bytes (and a template's few), no more completion tokens than the ids it
    // gave for them (which a check replays). A pod cannot bill a client for tokens it made up.
    s.prompt_tokens = std::clamp<int64_t>(facts.prompt_tokens.value_or(0), 0,
                                          static_cast<int64_t>(call.forward.size()) + 256);
    s.completion_tokens = std::clamp<int64_t>(facts.completion_tokens.value_or(0), 0,
                                              static_cast<int64_t>(facts.token_ids.size()));
    s.seconds = seconds_since(call.started);
    s.charge = price_of(options.prices, s.prompt_tokens, s.completion_tokens);
    s.pod_id = chosen.node;
    {
      std::lock_guard<std::mutex> lock(mutex);
      const auto live = pods.find(chosen.node);
      if (live != pods.end()) s.pod_name = live->second.registration.name;
    }
    return s;
  }

  // Whether a pod never passed a check: its answers are checked before the client gets them.
  bool untrusted(const std::string& node) {
    std::lock_guard<std::mutex> lock(mutex);
    return records[node].passed == 0;
  }

  // Checks an untrusted pod's answer now, before it goes to the client. FAILED: the client
  // gets another pod's answer instead (the pod's reputation and pending credits are gone).
  Outcome check_first(const Served& s) {
    if (s.token_ids.empty() || static_cast<int64_t>(s.token_ids.size()) != s.completion_tokens) {
      return Outcome::NONE;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++records[s.pod_id].checks_pending;
      probation.insert(s.pod_id);
    }
    return check(s);
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
    std::lock_guard<std::mutex> lock(mutex);
    --totals.active;
    totals.tokens += s.completion_tokens;
    totals.prompt_tokens += s.prompt_tokens;
    if (status == "unpaid") ++totals.unpaid;
    recent.push_back({{"at_ms", unix_ms()},
                      {"model", s.model},
                      {"pod", s.pod_id},
                      {"pod_name", s.pod_name},
                      {"prompt_tokens", s.prompt_tokens},
                      {"completion_tokens", s.completion_tokens},
                      {"seconds", s.seconds},
                      {"status", status}});
    while (recent.size() > kRecent) recent.pop_front();
    if (s.pod_id.empty()) return;
    Record& record = records[s.pod_id];
    ++record.requests;
    record.tokens += s.completion_tokens;
    // Checked: a sample, whole answers with tokens (ids the pod gave for every one it was
    // paid for).
    if (checked != Outcome::NONE || s.token_ids.empty() ||
        static_cast<int64_t>(s.token_ids.size()) != s.completion_tokens) {
      return;
    }
    const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
    if (!should_check(record.checked + static_cast<int64_t>(queued_checks_of(s.pod_id)),
                      options.check_rate, draw)) {
      return;
    }
    if (checks.size() >= kMaxQueuedChecks) {
      ++totals.checks_skipped;
      return;
    }
    // A pod's first check goes first: until its verdict, the pod is on probation.
    const bool first_of_pod = record.checked == 0 && record.checks_pending == 0;
    ++record.checks_pending;
    if (record.passed == 0) probation.insert(s.pod_id);
    if (first_of_pod) {
      checks.push_front(std::move(s));
    } else {
      checks.push_back(std::move(s));
    }
    checks_changed.notify_all();
  }

  size_t queued_checks_of(const std::string& pod_id) const {
    return static_cast<size_t>(std::count_if(checks.begin(), checks.end(),
                                             [&](const Served& c) { return c.pod_id == pod_id; }));
  }

  void failed_request(const std::string& model) {
    std::lock_guard<std::mutex> lock(mutex);
    --totals.active;
    ++totals.failed;
    recent.push_back({{"at_ms", unix_ms()}, {"model", model}, {"status", "failed"}});
    while (recent.size() > kRecent) recent.pop_front();
  }

  // POST /v1/chat/completions and /v1/completions: the whole request to one pod, chosen
  // by the router; tried on another (up to kAttempts) when a pod fails before its first
  // byte of answer. A streamed answer is passed on as it comes. Charged once whole.
  void complete(const httplib::Request& req, httplib::Response& res) {
    const std::optional<std::string> key = client_key(req);
    if (!key) {
      return send_error(res, 401, "authentication_error", "a valid API key is required");
    }
    // Per key; on a hub without keys, per client address.
    const double wait = rate_limit.take(key->empty() ? "address:" + req.remote_addr : *key);
    if (wait > 0) {
      res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(wait))));
      return send_error(res, 429, "rate_limit_error",
                        "too many requests for this key: " +
                            std::to_string(options.requests_per_minute) + " a minute; retry in " +
                            std::to_string(static_cast<int64_t>(std::ceil(wait))) + " s");
    }
    Call call;
    call.body = json::parse(req.body, nullptr, false);
    if (call.body.is_discarded() || !call.body.is_object()) {
      return send_error(res, 400, "invalid_request_error", "the body is not a JSON object");
    }
    const json& body = call.body;
    if (!body.contains("model") || !body["model"].is_string()) {
      return send_error(res, 400, "invalid_request_error", "field 'model': a string is required");
    }
    call.model_name = body["model"].get<std::string>();
    call.max_tokens = 256;
    for (const char* field : {"max_tokens", "max_completion_tokens"}) {
      if (body.contains(field) && body[field].is_number_integer()) {
        call.max_tokens = std::clamp<int64_t>(body[field].get<int64_t>(), 1, int64_t{1} << 20);
      }
    }
    // Four bytes a token, roughly: the hub does not tokenize.
    call.prompt_tokens = static_cast<int64_t>(req.body.size() / 4) + 1;
    call.client = Credits::client_account(*key);
    call.path = req.path;
    call.endpoint = req.path == "/v1/chat/completions" ? "chat" : "completions";
    call.stream = body.contains("stream") && body["stream"] == true;
    if (call.stream) {
      const json& o = body.contains("stream_options") ? body["stream_options"] : json();
      call.client_wants_usage = o.is_object() && o.value("include_usage", false) == true;
    }
    json forward = body;
    forward["herd_token_ids"] = true;
    if (call.stream) forward["stream_options"] = {{"include_usage", true}};
    call.forward = forward.dump();
    bool known = false, unserved = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      const auto it = models.find(call.model_name);
      known = it != models.end();
      if (known) call.model = it->second;
      unserved = !known || router.serving(call.model) == 0;
    }
    // No live pod serves it: counted as demand, maybe loaded (else answered as before).
    if (unserved && answer_unserved(call.model_name, res)) return;
    if (!known) {
      return send_error(res, 404, "invalid_request_error",
                        "model '" + call.model_name + "' is not served by any pod");
    }
    const Charge most = price_of(options.prices, call.prompt_tokens, call.max_tokens);
    try {
      if (!credits.can_pay(call.client, most.client_pays)) {
        return send_error(res, 402, "insufficient_quota",
                          "this key's credits (" + std::to_string(credits.balance(call.client)) +
                              ") do not cover the request's most (" +
                              std::to_string(most.client_pays) + "): lower max_tokens");
      }
    } catch (const Error& e) {
      return send_error(res, 503, "server_error", e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      call.request_id = replica + "-" + std::to_string(++next_request);
      ++totals.requests;
      ++totals.active;
    }
    call.started = Clock::now();
    if (call.stream) return complete_streamed(std::move(call), res);
    std::string failure;
    const bool answered =
        try_pods(call, failure, [&](const Chosen& chosen, httplib::Client& pod, std::string& why) {
          return answer_whole(call, chosen, pod, res, why);
        });
    if (answered) return;
    failed_request(call.model_name);
    send_error(res, 503, "server_error", no_answer(call, failure));
  }

  enum class Attempt { ANSWERED, FAILED };  // what a request came to on one pod

  // Sends the request to the pods the router chooses, one after another (up to kAttempts),
  // until one answers. `attempt` talks to the chosen pod, tells the router when it is done
  // with it (finished()) and, on FAILED, says why in its last argument. False when no pod
  // answered, with the last reason in `failure`.
  bool try_pods(
      const Call& call, std::string& failure,
      const std::function<Attempt(const Chosen&, httplib::Client&, std::string&)>& attempt) {
    failure = "no pod serves it now";
    std::vector<PodId> tried;
    for (int n = 0; n < kAttempts; ++n) {
      const auto chosen = choose(call.model, call.prompt_tokens, call.max_tokens, tried);
      if (!chosen) break;
      tried.push_back(chosen->pod);
      const auto pod = pod_client(chosen->url, options.pod_ca_file, 600);
      if (!pod) {
        finished(*chosen);
        failure = "its URL " + chosen->url + " cannot be reached from this hub";
        continue;
      }
      if (attempt(*chosen, *pod, failure) == Attempt::ANSWERED) return true;
    }
    return false;
  }

  static std::string no_answer(const Call& call, const std::string& failure) {
    return "no pod could answer for model '" + call.model_name + "': " + failure;
  }

  // An untrusted pod's whole answer is checked before it is sent (check_first); FAILED: it
  // is not the client's, and `why` says so.
  Outcome check_before_sending(const Call& call, const Chosen& chosen, const AnswerFacts& facts,
                               std::string& why) {
    const Outcome checked = check_first(answer_of(call, chosen, facts));
    if (checked == Outcome::FAILED) why = "its answer failed a check";
    return checked;
  }

  // One pod's whole (not streamed) answer, passed on as it came but for herd's extension.
  Attempt answer_whole(const Call& call, const Chosen& chosen, httplib::Client& pod,
                       httplib::Response& res, std::string& why) {
    const httplib::Result answer = pod.Post(call.path, call.forward, "application/json");
    finished(chosen);
    if (!answer || answer->status >= 500) {
      why = answer ? "it answered " + std::to_string(answer->status)
                   : "it did not answer (" + httplib::to_string(answer.error()) + ")";
      return Attempt::FAILED;
    }
    AnswerFacts facts;
    std::string body = read_answer(answer->body, facts);
    const bool whole = answer->status == 200 && facts.completion_tokens.has_value();
    Outcome checked = Outcome::NONE;
    if (whole && untrusted(chosen.node)) {
      checked = check_before_sending(call, chosen, facts, why);
      // Not for the client: another pod answers, and only that is charged.
      if (checked == Outcome::FAILED) return Attempt::FAILED;
    }
    const std::string type = answer->get_header_value("Content-Type");
    res.status = answer->status;
    res.set_content(std::move(body), type.empty() ? "application/json" : type);
    res.set_header("X-Herd-Pod", chosen.url);
    if (whole) {
      served(answer_of(call, chosen, facts), checked);
    } else {
      failed_request(call.model_name);  // the pod refused the request: not charged
    }
    return Attempt::ANSWERED;
  }

  void complete_streamed(Call call, httplib::Response& res) {
    res.set_chunked_content_provider(
        "text/event-stream", [this, call = std::move(call)](size_t, httplib::DataSink& sink) {
          std::string failure;
          const bool answered = try_pods(
              call, failure, [&](const Chosen& chosen, httplib::Client& pod, std::string& why) {
                return answer_streamed(call, chosen, pod, sink, why);
              });
          if (!answered) {
            failed_request(call.model_name);
            const json error = {
                {"error", {{"message", no_answer(call, failure)}, {"type", "server_error"}}}};
            const std::string event = "data: " + error.dump() + "\n\ndata: [DONE]\n\n";
            sink.write(event.data(), event.size());
          }
          sink.done();
          return true;
        });
  }

  // One pod's streamed answer, passed on to the client as it comes (an untrusted pod's held
  // until its check). FAILED only before anything was sent: once the client has part of an
  // answer it is too late to try another pod.
  Attempt answer_streamed(const Call& call, const Chosen& chosen, httplib::Client& pod,
                          httplib::DataSink& sink, std::string& why) {
    bool wrote = false, failed = false, client_gone = false;
    StreamReader reader(call.client_wants_usage);
    const bool hold = untrusted(chosen.node);
    std::string held;
    auto send = [&](const std::string& out) {
      if (out.empty() || client_gone) return;
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
    forward.response_handler = [&](const httplib::Response& r) {
      failed = r.status >= 500;
      if (failed) why = "it answered " + std::to_string(r.status);
      return !failed;
    };
    forward.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      send(reader.feed({data, n}));
      return !client_gone;
    };
    const httplib::Result r = pod.send(forward);
    if (!r && !failed && !client_gone) {
      failed = true;
      why = "it did not answer (" + httplib::to_string(r.error()) + ")";
    }
    send(reader.flush());
    finished(chosen);
    const AnswerFacts& facts = reader.facts();
    const bool whole = !failed && !client_gone && facts.finished && facts.completion_tokens;
    Outcome checked = Outcome::NONE;
    if (hold && !failed) {
      if (whole) checked = check_before_sending(call, chosen, facts, why);
      if (checked == Outcome::FAILED) return Attempt::FAILED;  // never sent
      wrote = !held.empty();
      if (wrote && !sink.write(held.data(), held.size())) client_gone = true;
    }
    if (!wrote && failed) return Attempt::FAILED;
    // Charged only when the answer was whole: it finished and the pod said what it used.
    if (whole && !client_gone) {
      served(answer_of(call, chosen, facts), checked);
    } else {
      failed_request(call.model_name);
    }
    return Attempt::ANSWERED;
  }

  // ---- loads of models no pod serves (demand.h) ----

  // A pod's registration as demand.h sees it; its control token. Under the lock.
  std::string pod_loads(const std::string& pod_id, const Registration& r) {
    std::vector<std::string> served;
    for (const ServedModel& m : r.models) served.push_back(m.name);
    return demand.pod_registered(pod_id, r.loadable, served);
  }

  // GET /api/network's view of a pod's loads. Under the lock.
  void add_pod_loads(json& pod, const std::string& pod_id) const {
    pod["loadable"] = demand.loadable(pod_id);
    const std::string loading = demand.loading_on(pod_id);
    pod["loading"] = loading.empty() ? json(nullptr) : json(loading);
  }

  // GET /v1/models: the models no live pod serves that some can load, marked. Under the lock.
  void add_loadable_models(json& data, const std::map<std::string, int>& served) const {
    std::map<std::string, int> loadable;  // name -> pods that can load it
    for (const auto& [id, pod] : pods) {
      for (const std::string& m : demand.loadable(id)) {
        if (!served.contains(m)) ++loadable[m];
      }
    }
    for (const auto& [name, n] : loadable) {
      const bool loading = demand.loading(name);
      data.push_back({{"id", name},
                      {"object", "model"},
                      {"owned_by", "herd-network"},
                      {"pods", 0},
                      {"loadable_pods", n},
                      {"state", loading ? "loading" : "loadable"}});
    }
  }

  // The fewest other live pods that serve one of the pod's models. Under the lock.
  int64_t others_serving(const Pod& pod) const {
    int64_t fewest = INT64_MAX;
    for (const ServedModel& m : pod.registration.models) {
      const auto it = models.find(m.name);
      const int64_t n = it == models.end() ? 0 : static_cast<int64_t>(router.serving(it->second));
      fewest = std::min(fewest, std::max<int64_t>(0, n - (router.live(pod.id) ? 1 : 0)));
    }
    return fewest == INT64_MAX ? 0 : fewest;
  }

  struct LoadOrder {
    std::string pod, url, token;
  };

  // A request for `model`, which no live pod serves: counted; once its demand reaches
  // load_after, one pod that lists it as loadable is asked to load it (choose_loader). The
  // client gets 503 and Retry-After meanwhile. False when no pod can load it (or loads are
  // off): the caller answers as for any model no pod serves.
  bool answer_unserved(const std::string& model, httplib::Response& res) {
    const auto now = Clock::now();
    const int after = options.demand.load_after;
    if (after <= 0 || model.empty() || model.size() > 256) return false;
    std::optional<LoadOrder> order;
    std::string message;
    {
      std::lock_guard<std::mutex> lock(mutex);
      const int n = demand.record(model, now);
      if (const auto load = demand.load_of(model, now)) {
        message = "model '" + model + "' is being loaded on a pod (for " +
                  std::to_string(static_cast<int>(seconds_since(load->started))) +
                  " s): try again shortly";
      } else {
        std::vector<LoadCandidate> candidates;
        for (const std::string& pod_id : demand.pods_that_can_load(model)) {
          const auto p = pods.find(pod_id);
          if (p == pods.end() || demand.refused_recently(model, pod_id, now) ||
              !demand.loading_on(pod_id).empty() || records[pod_id].reputation < kMinReputation) {
            continue;
          }
          candidates.push_back({pod_id, router.active(p->second.id), p->second.registration.slots,
                                others_serving(p->second)});
        }
        if (candidates.empty()) return false;
        if (n < after) {
          message = "model '" + model + "' is not loaded on any pod now; " +
                    std::to_string(candidates.size()) + " can load it, which one does after " +
                    std::to_string(after) + " requests within " +
                    std::to_string(options.demand.window.count()) + " s (" + std::to_string(n) +
                    " so far): try again shortly";
        } else {
          const LoadCandidate& chosen = candidates[*choose_loader(candidates)];
          const Pod& pod = pods.at(chosen.pod);
          demand.start(model, chosen.pod, pod.id, now);
          order = LoadOrder{chosen.pod, pod.registration.url, demand.token(chosen.pod)};
          message = "model '" + model + "' is being loaded on a pod (" + pod.registration.name +
                    "): try again shortly";
        }
      }
    }
    if (order) {
      if (const std::string problem = send_load(model, *order); !problem.empty()) {
        message = "model '" + model + "' is not loaded on any pod now: the pod asked to load it " +
                  problem + "; another will be asked";
      }
    }
    res.set_header("Retry-After", std::to_string(kLoadRetryAfterSeconds));
    send_error(res, 503, "server_error", message);
    return true;
  }

  // POST /api/load {"model": model} on the pod, with its control token: "" when it took the
  // load (202), else what went wrong (and the load ends: demand.failed).
  std::string send_load(const std::string& model, const LoadOrder& order) {
    std::string problem;
    const auto client = pod_client(order.url, options.pod_ca_file, 5);
    if (!client) {
      problem = "has a URL this hub cannot reach";
    } else {
      client->set_connection_timeout(2);
      const httplib::Result r =
          client->Post("/api/load", httplib::Headers{{"Authorization", "Bearer " + order.token}},
                       json{{"model", model}}.dump(), "application/json");
      if (!r) {
        problem = "did not answer (" + httplib::to_string(r.error()) + ")";
      } else if (r->status != 202) {
        problem = "answered " + std::to_string(r->status);
      }
    }
    if (!problem.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      demand.failed(model, order.pod, Clock::now());
    }
    return problem;
  }

  // ---- checks (the worker thread) ----

  // Pods that may check a request of `model` served by `pod_id`: live, trusted, others;
  // the most trusted first, in random order among equals (a pod cannot know which pod will
  // check it, nor two pods agree to check each other).
  std::vector<std::pair<std::string, std::string>> checkers(const std::string& model,
                                                            const std::string& pod_id) {
    std::vector<std::tuple<double, uint64_t, std::string, std::string>> found;
    for (const auto& [id, pod] : pods) {
      if (id == pod_id) continue;
      const Record& r = records[id];
      if (r.reputation < kMinReputation) continue;
      bool serves = false;
      for (const ServedModel& m : pod.registration.models) serves = serves || m.name == model;
      if (serves) found.emplace_back(-r.reputation, rng(), id, pod.registration.url);
    }
    std::sort(found.begin(), found.end());
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [rep, order, id, url] : found) out.emplace_back(id, url);
    return out;
  }

  // Asks one checker; nullopt when it could not answer (not a verdict on the pod).
  std::optional<Verdict> ask(const std::string& url, const Served& s, bool& unverifiable) {
    const auto client = pod_client(url, options.pod_ca_file, 300);
    if (!client) return std::nullopt;
    const json request = {
        {"endpoint", s.endpoint}, {"request", s.body}, {"completion_token_ids", s.token_ids}};
    const httplib::Result r = client->Post("/api/verify", request.dump(), "application/json");
    if (!r) return std::nullopt;
    if (r->status == 422) {
      unverifiable = true;
      return std::nullopt;
    }
    if (r->status == 400) {
      // The checker's vocabulary has no such token: invented, or another model's.
      const json answer = json::parse(r->body, nullptr, false);
      const std::string message =
          answer.is_object() ? answer["error"].value("message", std::string()) : std::string();
      if (message.find("completion_token_ids") != std::string::npos) {
        Verdict v;
        v.tokens = static_cast<int64_t>(s.token_ids.size());
        v.implausible = v.tokens;
        v.detail = message;
        return v;
      }
      return std::nullopt;
    }
    if (r->status != 200) return std::nullopt;
    try {
      return judge(json::parse(r->body), s.token_ids.size(), options.thresholds);
    } catch (const std::exception&) {
      return std::nullopt;  // not an answer: the checker's fault, not the pod's
    }
  }

  Outcome check(const Served& s) {
    std::vector<std::pair<std::string, std::string>> candidates;
    {
      std::lock_guard<std::mutex> lock(mutex);
      candidates = checkers(s.model, s.pod_id);
    }
    // A failed check is confirmed by a second checker when there is one: a lone checker
    // that lies cannot take an honest pod's reputation when others can say otherwise.
    std::optional<Verdict> first, second;
    bool unverifiable = false;
    size_t next = 0;
    while (!first && next < candidates.size() && !unverifiable) {
      first = ask(candidates[next++].second, s, unverifiable);
    }
    if (first && !first->passed) {
      while (!second && next < candidates.size() && !unverifiable) {
        second = ask(candidates[next++].second, s, unverifiable);
      }
    }
    std::unique_lock<std::mutex> lock(mutex);
    if (!first) {
      ++(unverifiable || candidates.empty() ? totals.checks_skipped : totals.check_errors);
      if (--records[s.pod_id].checks_pending == 0) probation.erase(s.pod_id);
      return Outcome::NONE;
    }
    Record& record = records[s.pod_id];
    ++record.checked;
    if (--record.checks_pending == 0) probation.erase(s.pod_id);
    ++totals.checks;
    const bool failed = !first->passed && (!second || !second->passed);
    if (!first->passed && second && second->passed) ++totals.disagreements;
    if (!failed) {
      const Verdict& pass = first->passed ? *first : *second;
      totals.passed_min_probability = std::min(totals.passed_min_probability, pass.min_probability);
      totals.passed_max_gap = std::max(totals.passed_max_gap, pass.max_gap);
      totals.passed_min_z = std::min(totals.passed_min_z, pass.z);
      ++record.passed;
      probation.erase(s.pod_id);
      // A pod caught once stays below kMinReputation: checks of its requests that were
      // queued before the verdict do not bring it back.
      if (record.failed == 0)
        record.reputation = std::min(1.0, record.reputation + kReputationGain);
    } else {
      ++record.failed;
      ++totals.checks_failed;
      totals.failed_tokens += first->tokens;
      totals.failed_implausible += first->implausible;
      record.reputation *= kReputationLoss;
      record.last_failure = "request " + s.request_id + ": " + std::to_string(first->implausible) +
                            " of " + std::to_string(first->tokens) + " tokens implausible; " +
                            first->detail;
    }
    const auto live = pods.find(s.pod_id);
    if (live != pods.end()) router.set_reputation(live->second.id, record.reputation);
    const std::string failure = record.last_failure;
    lock.unlock();  // the books, outside the hub's lock
    try {
      if (failed) {
        credits.withhold(s.pod_id, "failed check: " + failure);
      } else {
        credits.verified(s.request_id, s.pod_id, s.charge.pod_earns);
      }
    } catch (const Error&) {
    }
    return failed ? Outcome::FAILED : Outcome::PASSED;
  }

  void check_worker() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      checks_changed.wait(lock, [&] { return stopping || !checks.empty(); });
      if (stopping) return;
      Served s = std::move(checks.front());
      checks.pop_front();
      ++checks_running;
      lock.unlock();
      check(s);
      lock.lock();
      --checks_running;
      checks_changed.notify_all();
    }
  }

  // ---- the hub's round trips to its pods, and settling ----

  void probe_round_trips() {
    std::vector<std::pair<std::string, std::string>> targets;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [id, pod] : pods) targets.emplace_back(id, pod.registration.url);
    }
    for (const auto& [id, url] : targets) {
      const auto client = pod_client(url, options.pod_ca_file, 2);
      if (!client) continue;
      client->set_connection_timeout(2);
      const auto start = Clock::now();
      const httplib::Result r = client->Get("/health");
      if (!r) continue;
      const double rtt = seconds_since(start);
      std::lock_guard<std::mutex> lock(mutex);
      records[id].rtt_seconds = rtt;
      const auto live = pods.find(id);
      if (live != pods.end()) router.set_rtt(live->second.id, rtt);
    }
  }

  // Pays what is pending of the pods in good standing (never failed a check).
  void settle() {
    std::vector<std::string> good;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [id, r] : records) {
        if (r.failed == 0) good.push_back(id);
      }
    }
    try {
      credits.settle(good, replica + "-" + std::to_string(unix_ms()));
    } catch (const Error&) {
    }
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
    http.Get("/api/ledger", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        send_json(res, 200, ledger_view(req.get_param_value("account")));
      } catch (const Error& e) {
        send_error(res, 503, "server_error", e.what());
      }
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mutex);
      send_json(res, 200, {{"status", "ok"}, {"pods", pods.size()}});
    });
    serve_hub_page(http);
  }
};

HubServer::HubServer(HubOptions options, Ledger& ledger)
    : state_(std::make_unique<State>(std::move(options), ledger)) {
  State& s = *state_;
  if (s.options.check_rate < 0 || s.options.check_rate > 1) {
    throw Error("hub", "the check rate must be within [0, 1]");
  }
  for (const std::string& key : s.options.api_keys) {
    const std::string account = Credits::client_account(key);
    s.credits.grant(account, s.options.grant_credits);
    s.clients.insert(account);
  }
  if (s.options.api_keys.empty()) s.clients.insert(Credits::client_account(""));
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
  // Expiry every second and settling every period; round trips every heartbeat, on their
  // own thread (a dead pod takes seconds to time out); checks on theirs.
  std::thread sweeper([&s] {
    auto settled = Clock::now();
    std::unique_lock<std::mutex> lock(s.mutex);
    while (!s.stopping) {
      s.stop_changed.wait_for(lock, std::chrono::seconds(1));
      lock.unlock();
      s.expire();
      if (Clock::now() - settled >= s.options.settle_period) {
        settled = Clock::now();
        s.settle();
      }
      lock.lock();
    }
  });
  std::thread prober([&s] {
    std::unique_lock<std::mutex> lock(s.mutex);
    while (!s.stopping) {
      lock.unlock();
      s.probe_round_trips();
      lock.lock();
      s.stop_changed.wait_for(lock, s.options.heartbeat);
    }
  });
  std::thread checker([&s] { s.check_worker(); });
  s.http.listen_after_bind();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
  }
  s.stop_changed.notify_all();
  s.checks_changed.notify_all();
  sweeper.join();
  prober.join();
  checker.join();
}

void HubServer::stop() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
  }
  s.stop_changed.notify_all();
  s.checks_changed.notify_all();
  s.http.stop();
}

json HubServer::network() const {
  return state_->network();
}

void HubServer::expire_silent_pods() {
  state_->expire();
}

json HubServer::ledger() const {
  return state_->ledger_view();
}

bool HubServer::wait_checks(std::chrono::milliseconds timeout) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  return s.checks_changed.wait_for(lock, timeout,
                                   [&] { return s.checks.empty() && s.checks_running == 0; });
}

}  // namespace herd::hub
