// herd serve: an OpenAI-compatible HTTP server with continuous batching over the local
// model (later, over a plan across nodes: the server only talks to engine::ModelRunner).
// Listens first (so /health can say "loading"), loads the model, serves until SIGINT or
// SIGTERM, then refuses new requests, finishes the ones in flight and exits. With --hub and
// --models-dir, the hub may ask it to serve another model of the dir (ModelSwitch).
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "chat/template.h"
#include "cli/commands.h"
#include "cli/http_limit_options.h"
#include "cli/model_options.h"
#include "cli/speculative_options.h"
#include "cli/store_options.h"
#include "engine/request_speed.h"
#include "engine/runner.h"
#include "engine/scheduler.h"
#include "hub/hub_client.h"
#include "hub/pod_loads.h"
#include "net/api_keys.h"
#include "server/http_server.h"
#include "util/cpu_info.h"
#include "util/error.h"
#include "util/split_name.h"
#include "util/system_memory.h"

namespace herd::cli {
namespace {

// The name a model file is served by: its stem, a split model's without -00001-of-0000N.
std::string model_name_of(const std::string& path) {
  return model_stem(std::filesystem::path(path).filename().string());
}

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions http;
  std::string api_key_file;  // keys, one a line, beside http.api_keys (net/api_keys.h)
  int64_t slots = 4;
  int64_t max_queue = 64;
  int64_t batch_tokens = 256;
  std::string alias;
  int drain_seconds = 60;
  std::vector<std::string> hubs;   // http[s]://host:port of each herd hub (replica)
  std::string public_url;          // how the hub's clients reach this server
  std::string hub_name;            // the pod's name at the hub
  std::string hub_ca;              // certificate authorities for an https hub (empty: the system's)
  std::string models_dir;          // GGUF files the hub may ask this pod to load (POST /api/load)
  SpeculativeOptions speculative;  // --lookup, --draft, --draft-max
};

// The pod's speed as a hub routes by it: a prefill of up to 64 tokens, then up to 16 tokens
// decoded after it, one request through a scheduler of its own before the server's starts
// (the server's scheduler keeps no cache of these positions: they are written over).
struct PodSpeed {
  double decode_tokens_per_s = 0;
  double prefill_tokens_per_s = 0;
};

PodSpeed measure_pod_speed(engine::ModelRunner& runner, const tokenizer::Tokenizer& tok) {
  const int64_t n_prompt = std::min<int64_t>(64, runner.n_ctx() / 2);
  const int64_t n_decode = std::min<int64_t>(16, runner.n_ctx() / 4);
  const int64_t n_vocab = runner.hparams().n_vocab;
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int64_t i = 0; i < n_prompt; ++i) {
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>(1 + i % (n_vocab - 1));
  }
  engine::SchedulerOptions so;
  so.batch_tokens = n_prompt;  // the prompt in one pass
  engine::Scheduler scheduler(runner, tok, so, nullptr);
  const engine::RequestSpeed speed = engine::time_request(scheduler, prompt, n_decode, true);
  return {speed.decode_tokens_per_s(), speed.prefill_tokens_per_s()};
}

server::ServedModel served_model(engine::ModelRunner& runner, const tokenizer::Tokenizer& tok,
                                 const ServeOptions& o) {
  server::ServedModel m;
  m.id = o.alias.empty() ? model_name_of(o.model.model) : o.alias;
  m.tokenizer = &tok;
  m.facts = server::read_model_facts(runner.file());
  if (auto source = runner.file().get_string_or("tokenizer.chat_template")) {
    m.template_source = std::string(*source);
    m.chat_template = chat::Template::parse(m.template_source);
  }
  if (auto id = tok.bos()) m.bos = std::string(tok.token_text(*id));
  if (auto id = tok.eos()) m.eos = std::string(tok.token_text(*id));
  const HParams& hp = runner.hparams();
  // What the runner says of itself: this process, or a pod it coordinates (runner_status.h).
  const engine::RunnerStatus status = runner.status();
  m.node_info = {
      {"name", status.node},
      {"arch", std::string(runner.info().arch->name)},
      {"layers", {{"first", 0}, {"end", hp.n_layer}, {"total", hp.n_layer}}},
      {"n_embd", hp.n_embd},
      {"n_head", hp.n_head},
      {"n_head_kv", hp.n_head_kv},
      {"n_vocab", hp.n_vocab},
      {"n_ff", hp.n_ff},
      {"n_expert", hp.n_expert},
      {"n_ctx", runner.n_ctx()},
      {"slots", runner.n_seq()},
      {"weight_bytes", runner.info().weight_bytes},
      {"runner", runner.describe()},
      {"threads", status.threads},
      {"isa", status.isa},
      {"kv_cache_bytes", status.kv_cache_bytes},
      {"packed_weight_bytes", status.packed_weight_bytes},
  };
  if (status.pod) {
    // Across nodes: the stages and who runs them (the page lists them); GET /api/cluster asks
    // the runner for the pod as it is then.
    nlohmann::json stages = nlohmann::json::array();
    for (const engine::StageStatus& s : status.stages) {
      nlohmann::json ranks = nlohmann::json::array();
      for (const engine::RankStatus& r : s.ranks) {
        ranks.push_back({{"node", r.node},
                         {"address", r.address},
                         {"heads", {r.head_begin, r.head_end}},
                         {"memory_bytes", r.memory_bytes}});
      }
      stages.push_back({{"layers", {s.layer_begin, s.layer_end}}, {"ranks", ranks}});
    }
    m.node_info["stages"] = stages;
    m.node_info["parallel"] = status.parallel;
    m.cluster_status = [&runner] { return runner.cluster_json(); };
  } else {
    // Where the forward pass runs: "cpu", or the device and the memory it holds there.
    m.node_info["device"] = status.device;
    m.node_info["device_bytes"] = status.device_bytes;
    // What GET /api/cluster's one-node view shows of this machine (read once, at load).
    const SystemMemory memory = system_memory();
    m.node_info["cores"] = cpu_cores().logical;
    m.node_info["free_memory_bytes"] = memory.available_bytes;
    m.node_info["total_memory_bytes"] = memory.total_bytes;
  }
  return m;
}

// A model as the server serves it: the runner, its tokenizer, what the API shows of it, its
// speed for the hub, the scheduler and the engine thread that runs it. Fields are destroyed
// in reverse order; stop() first (the engine thread is joined).
struct Served {
  std::unique_ptr<engine::ModelRunner> runner;
  std::optional<tokenizer::Tokenizer> tok;
  server::ServedModel model;
  PodSpeed speed;
  std::unique_ptr<engine::ModelRunner> draft;  // --draft, on this machine
  std::unique_ptr<engine::Scheduler> scheduler;
  std::thread engine;
  std::future<void> engine_done;  // ready once the engine thread's run() returned

  ~Served() { stop(); }
  // Lets the running requests finish, up to `wait`, then ends the rest with an error.
  void stop(std::chrono::seconds wait = std::chrono::seconds(0), const std::string& why = "") {
    if (!engine.joinable()) return;
    scheduler->shutdown();
    if (wait.count() > 0 && engine_done.wait_for(wait) != std::future_status::ready) {
      scheduler->abort(why);
    }
    engine.join();
  }
};

// Opens `runner` (or the model at `path` when it is null) as `name`, measures its speed when
// a hub routes by it, and starts its scheduler. Throws herd::Error naming the problem.
std::unique_ptr<Served> open_served(std::unique_ptr<engine::ModelRunner> runner,
                                    const std::string& path, const std::string& name,
                                    const ServeOptions& o, server::Metrics& metrics,
                                    server::HttpServer& http) {
  auto s = std::make_unique<Served>();
  ModelOptions mo = o.model;
  mo.model = path;
  o.speculative.apply(mo);
  s->runner = runner ? std::move(runner) : mo.open(o.slots);
  s->tok.emplace(tokenizer::Tokenizer::from_gguf(s->runner->file()));
  ServeOptions named = o;
  named.alias = name;
  s->model = served_model(*s->runner, *s->tok, named);
  if (!o.hubs.empty()) {
    // Measured before the scheduler owns the runner.
    s->speed = measure_pod_speed(*s->runner, *s->tok);
    std::fprintf(stderr, "serve: measured %.1f tok/s decode, %.0f tok/s prefill (for the hub)\n",
                 s->speed.decode_tokens_per_s, s->speed.prefill_tokens_per_s);
  }
  engine::SchedulerOptions so;
  so.max_queue = o.max_queue;
  so.batch_tokens = o.batch_tokens;
  // The draft runs here, beside the coordinator, with a context and slots like the model's.
  s->draft = o.speculative.open_draft(o.model, *s->runner, o.slots);
  so.draft = s->draft.get();
  o.speculative.warn_without_head(*s->runner, "serve");
  if (s->draft) {
    std::fprintf(stderr, "serve: draft model %s (%s)\n", o.speculative.draft.c_str(),
                 s->draft->describe().c_str());
  }
  s->scheduler = std::make_unique<engine::Scheduler>(*s->runner, *s->tok, so, &metrics);
  std::promise<void> done;
  s->engine_done = done.get_future();
  s->engine =
      std::thread([&http, scheduler = s->scheduler.get(), done = std::move(done)]() mutable {
        try {
          scheduler->run();
        } catch (const std::exception& e) {
          http.set_degraded(std::string("the engine stopped: ") + e.what());
          std::fprintf(stderr, "serve: the engine stopped: %s\n", e.what());
        }
        done.set_value();
      });
  return s;
}

hub::Registration pod_registration(const ServeOptions& o, int port, const Served& s,
                                   const std::vector<std::string>& loadable) {
  hub::Registration pod;
  pod.name = o.hub_name.empty() ? s.model.id : o.hub_name;
  pod.url =
      o.public_url.empty() ? "http://" + o.http.host + ":" + std::to_string(port) : o.public_url;
  pod.models = {{s.model.id, s.runner->n_ctx()}};
  pod.slots = static_cast<int32_t>(s.runner->n_seq());
  pod.decode_tokens_per_s = s.speed.decode_tokens_per_s;
  pod.prefill_tokens_per_s = s.speed.prefill_tokens_per_s;
  pod.memory_bytes = system_memory().total_bytes;
  pod.loadable = loadable;
  return pod;
}

// The pod's side of POST /api/load: only the hub it registered with (the control token of
// the hub's last answer, compared in constant time) may make it serve another model of
// --models-dir. A load answers 202 at once and runs on its own thread: the server stops
// taking requests for the old model (503 "the model is loading"), lets the running ones
// finish (up to 60 s, as at a stop, then ends them), frees the old model, loads the new one,
// measures its speed and registers with the hub at once. One load at a time (409).
class ModelSwitch {
 public:
  ModelSwitch(const ServeOptions& o, hub::ModelDir dir, server::HttpServer& http,
              server::Metrics& metrics)
      : o_(o), dir_(std::move(dir)), http_(http), metrics_(metrics) {}
  ~ModelSwitch() { finish(); }

  // The model served at first, and the hub clients (one per replica of the hub).
  void start(std::unique_ptr<Served> first, std::vector<hub::HubClient*> hubs) {
    std::lock_guard lock(mutex_);
    current_ = std::move(first);
    hubs_ = std::move(hubs);
  }

  server::HttpServer::LoadAnswer request(const std::string& name, const std::string& auth) {
    std::lock_guard lock(mutex_);
    if (hubs_.empty()) {
      return {403, "this pod loads models only when its hub asks (herd serve --hub)"};
    }
    // Any replica of the hub may ask: the token of one of them.
    int status = 403;
    for (const hub::HubClient* h : hubs_) {
      status = hub::check_control_token(auth, h->control_token());
      if (status == 0 || status == 401) break;
    }
    if (status != 0) {
      return {status, status == 401 ? "the hub's control token is required "
                                      "(Authorization: Bearer TOKEN)"
                                    : "the control token is not this pod's hub's"};
    }
    if (stopping_) return {503, "the pod is stopping"};
    if (loading_) return {409, "the pod is already loading model '" + loading_name_ + "'"};
    const auto it = dir_.models.find(name);
    if (it == dir_.models.end()) {
      return {404, "model '" + name + "' is not in this pod's --models-dir"};
    }
    if (current_ && current_->model.id == name) {
      update_hubs(*current_);
      return {202, "model '" + name + "' is served already"};
    }
    if (thread_.joinable()) thread_.join();  // the last load, done
    loading_ = true;
    loading_name_ = name;
    thread_ = std::thread([this, name, path = it->second] { load(name, path); });
    return {202, "loading model '" + name + "'"};
  }

  // No more loads; waits for one running. Returns the model served now (may be null).
  Served* finish() {
    std::unique_lock lock(mutex_);
    stopping_ = true;
    lock.unlock();
    if (thread_.joinable()) thread_.join();
    lock.lock();
    return current_.get();
  }

 private:
  void load(const std::string& name, const std::string& path) {
    std::fprintf(stderr, "serve: the hub asked for model '%s': loading %s\n", name.c_str(),
                 path.c_str());
    std::unique_ptr<Served> old;
    {
      std::lock_guard lock(mutex_);
      old = std::move(current_);
    }
    std::string old_path;
    if (old) {
      http_.begin_loading();
      old->stop(std::chrono::seconds(o_.drain_seconds),
                "the pod stopped serving this model to load '" + name + "'");
      while (!http_.wait_unused(std::chrono::seconds(10))) {
        std::fprintf(stderr, "serve: still writing answers of model '%s'\n", old->model.id.c_str());
      }
      const auto found = dir_.models.find(old->model.id);
      old_path = found != dir_.models.end() ? found->second : o_.model.model;
      old.reset();  // its memory freed before the new model takes its own
    }
    std::unique_ptr<Served> next;
    try {
      next = open_served(nullptr, path, name, o_, metrics_, http_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "serve: loading model '%s' failed: %s; loading %s again\n", name.c_str(),
                   e.what(), old_path.c_str());
      try {
        next = open_served(nullptr, old_path, model_name_of(old_path), o_, metrics_, http_);
      } catch (const std::exception& again) {
        http_.set_degraded(std::string("no model: ") + again.what());
      }
    }
    std::lock_guard lock(mutex_);
    if (next) {
      http_.set_degraded("");
      http_.set_model(&next->model, next->scheduler.get());
      std::fprintf(stderr, "serve: ready: model '%s', %lld slots of %lld tokens; %s\n",
                   next->model.id.c_str(), static_cast<long long>(next->runner->n_seq()),
                   static_cast<long long>(next->runner->n_ctx()), next->runner->describe().c_str());
      update_hubs(*next);
    }
    current_ = std::move(next);
    loading_ = false;
  }

  // Every replica of the hub learns of the model at once (under mutex_).
  void update_hubs(const Served& s) {
    for (hub::HubClient* h : hubs_) h->update(pod_registration(o_, http_.port(), s, dir_.names()));
  }

  const ServeOptions& o_;
  const hub::ModelDir dir_;
  server::HttpServer& http_;
  server::Metrics& metrics_;
  std::mutex mutex_;  // guards what follows
  std::unique_ptr<Served> current_;
  std::vector<hub::HubClient*> hubs_;
  bool loading_ = false, stopping_ = false;
  std::string loading_name_;
  std::thread thread_;
};

void serve(const ServeOptions& o) {
  if (o.slots < 1 || o.slots > 256) throw Error("cli", "--slots must be between 1 and 256");
  hub::ModelDir dir;
  if (!o.models_dir.empty()) {
    dir = hub::list_model_dir(o.models_dir);
    for (const std::string& skipped : dir.skipped) {
      std::fprintf(stderr, "serve: --models-dir: %s\n", skipped.c_str());
    }
    std::fprintf(stderr, "serve: %zu models in %s\n", dir.models.size(), o.models_dir.c_str());
  }
  // Before any thread starts: a bad URL is refused, not found after the model loaded.
  for (const std::string& url : o.hubs) hub::parse_hub_url(url);
  server::ServerOptions http_options = o.http;
  http_options.speculative = o.speculative.params();
  if (!o.api_key_file.empty()) {
    for (std::string& key : net::read_key_file(o.api_key_file)) {
      http_options.api_keys.push_back(std::move(key));
    }
  }
  if (!o.http.api_keys.empty()) {
    std::fprintf(stderr,
                 "serve: --api-key shows its key to every user of this machine (the process "
                 "list); --api-key-file keeps it private\n");
  }
  // SIGINT and SIGTERM are taken by sigwait() below; every thread started from here on
  // inherits the mask. A peer that closes its socket must not kill the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // Under mpirun every rank runs this command, and only rank 0 may listen: which rank this
  // is is known once MPI is up, inside open(), where ranks 1..n-1 serve as nodes and never
  // return. So with --transport mpi the model loads before the port is bound (/health
  // cannot say "loading" meanwhile).
  std::unique_ptr<engine::ModelRunner> runner;
  if (o.model.cluster.transport == "mpi") runner = o.model.open(o.slots);

  server::Metrics metrics;
  server::HttpServer http(std::move(http_options), metrics);
  ModelSwitch models(o, dir, http, metrics);
  if (!o.models_dir.empty()) {
    http.set_load_handler([&models](const std::string& name, const std::string& auth) {
      return models.request(name, auth);
    });
  }
  http.bind();
  std::thread http_thread([&] { http.listen(); });
  std::fprintf(stderr, "serve: listening on http://%s:%d (loading %s)\n", o.http.host.c_str(),
               http.port(), o.model.model.c_str());

  std::unique_ptr<Served> first;
  try {
    first = open_served(std::move(runner), o.model.model,
                        o.alias.empty() ? model_name_of(o.model.model) : o.alias, o, metrics, http);
  } catch (...) {
    http.stop();
    http_thread.join();
    throw;
  }
  http.set_model(&first->model, first->scheduler.get());
  std::fprintf(stderr, "serve: ready: model '%s', %lld slots of %lld tokens; %s\n",
               first->model.id.c_str(), static_cast<long long>(first->runner->n_seq()),
               static_cast<long long>(first->runner->n_ctx()), first->runner->describe().c_str());
  // One client per hub: replicas of a hub each keep their own pod registry (docs/network.md),
  // so a pod registers with every one and each logs its own registration.
  std::vector<std::unique_ptr<hub::HubClient>> hub_clients;
  std::vector<hub::HubClient*> hubs;
  for (const std::string& url : o.hubs) {
    hub_clients.push_back(std::make_unique<hub::HubClient>(
        url, o.model.cluster.security.identity(),
        pod_registration(o, http.port(), *first, dir.names()),
        [](const std::string& line) { std::fprintf(stderr, "serve: %s\n", line.c_str()); },
        o.hub_ca));
    hubs.push_back(hub_clients.back().get());
  }
  models.start(std::move(first), std::move(hubs));

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "serve: %s: finishing the requests in flight\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  Served* current = models.finish();  // a load running is finished first
  hub_clients.clear();  // no more registrations: each hub drops the pod after its timeout
  http.begin_drain();
  if (current) current->stop();
  if (!http.wait_idle(std::chrono::seconds(o.drain_seconds))) {
    std::fprintf(stderr, "serve: some responses were still being written after %d s\n",
                 o.drain_seconds);
  }
  http.stop();
  http_thread.join();
  std::fprintf(stderr, "serve: stopped\n");
}

}  // namespace

void add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (chat, completions, web page) with batching");
  auto o = std::make_shared<ServeOptions>();
  o->model.add_to(*cmd);
  cmd->add_option("--host", o->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--slots", o->slots, "Requests generated at once (KV-cache slots)")
      ->capture_default_str();
  cmd->add_option("--queue", o->max_queue, "Requests that may wait for a slot; more get 503")
      ->capture_default_str();
  cmd->add_option("--batch-tokens", o->batch_tokens,
                  "Tokens per forward pass (decode tokens plus prompt chunks)")
      ->capture_default_str();
  cmd->add_option("--api-key", o->http.api_keys,
                  "Require 'Authorization: Bearer KEY' on /v1 and /api/verify; repeat for "
                  "several. Every user of the machine sees it: prefer --api-key-file")
      ->take_all();
  cmd->add_option("--api-key-file", o->api_key_file,
                  "Keys as --api-key, one a line (# comments); a private file (not "
                  "world-readable)");
  o->speculative.add_to(*cmd, "Speculative decoding",
                        " (requests may say otherwise: \"speculative\")");
  cmd->add_option("--alias", o->alias, "Model name in the API (default: the file's name)");
  add_http_limit_options(*cmd, o->http.limits);
  cmd->add_option("--hub", o->hubs,
                  "Register with a herd hub at http[s]://HOST:PORT (signed with the node "
                  "identity); repeat for each replica of a hub")
      ->take_all();
  cmd->add_option("--public-url", o->public_url,
                  "How the hub's clients reach this server (default: http://--host:--port)");
  cmd->add_option("--hub-name", o->hub_name, "This pod's name at the hub (default: the model's)");
  cmd->add_option(
      "--hub-ca", o->hub_ca,
      "PEM certificate authorities that vouch for an https hub (default: the system's)");
  cmd->add_option("--models-dir", o->models_dir,
                  "GGUF files (a model's name is its file's stem) the hub may ask this pod to "
                  "serve instead (POST /api/load with the hub's control token; with --hub)");
  cmd->callback([o] {
    // A model name becomes its file here, so that the API's model id is the file's name.
    // Under mpirun only rank 0 may pull (in ModelOptions::open): the id is then the name.
    if (o->model.cluster.transport != "mpi") {
      ResolvedModel resolved = resolve_model(o->model.model);
      o->model.model = std::move(resolved.path);
      o->model.store_name = std::move(resolved.store_name);
    } else if (o->alias.empty() && !std::filesystem::exists(o->model.model)) {
      if (auto name = store::parse_model_name(o->model.model)) o->alias = name->str();
    }
    serve(*o);
  });
}

}  // namespace herd::cli
