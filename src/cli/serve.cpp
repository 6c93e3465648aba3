// herd serve: an OpenAI-compatible HTTP server with continuous batching over the local
// model (later, over a plan across nodes: the server only talks to engine::ModelRunner).
// Listens first (so /health can say "loading"), loads the model, serves until SIGINT or
// SIGTERM, then refuses new requests, finishes the ones in flight and exits.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "chat/template.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cluster/cluster_runner.h"
#include "hub/hub_client.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "util/cpu_info.h"
#include "util/error.h"
#include "util/system_memory.h"

namespace herd::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions http;
  int64_t slots = 4;
  int64_t max_queue = 64;
  int64_t batch_tokens = 256;
  std::string alias;
  int drain_seconds = 60;
  std::vector<std::string> hubs;  // http://host:port of each herd hub (replica) to register with
  std::string public_url;         // how the hub's clients reach this server
  std::string hub_name;           // the pod's name at the hub
  std::string hub_ca;  // certificate authorities for an https hub (empty: the system's)
};

// The pod's speed as a hub routes by it: a prefill of up to 64 tokens, then up to 16 tokens
// decoded after it, timed on the runner before the scheduler starts (the scheduler keeps
// no cache of these positions, so they are simply written over).
struct PodSpeed {
  double decode_tokens_per_s = 0;
  double prefill_tokens_per_s = 0;
};

PodSpeed measure_pod_speed(engine::ModelRunner& runner) {
  using Clock = std::chrono::steady_clock;
  const int32_t n_prompt = static_cast<int32_t>(std::min<int64_t>(64, runner.n_ctx() / 2));
  const int32_t n_decode = static_cast<int32_t>(std::min<int64_t>(16, runner.n_ctx() / 4));
  const int32_t n_vocab = static_cast<int32_t>(runner.hparams().n_vocab);
  std::vector<float> logits;
  engine::Batch prompt;
  for (int32_t i = 0; i < n_prompt; ++i) prompt.add(1 + i % (n_vocab - 1), 0, i, i + 1 == n_prompt);
  auto start = Clock::now();
  runner.forward(prompt, logits);
  const double prefill = std::chrono::duration<double>(Clock::now() - start).count();
  start = Clock::now();
  for (int32_t i = 0; i < n_decode; ++i) {
    engine::Batch one;
    one.add(1, 0, n_prompt + i, true);
    runner.forward(one, logits);
  }
  const double decode = std::chrono::duration<double>(Clock::now() - start).count();
  return {n_decode / std::max(decode, 1e-9), n_prompt / std::max(prefill, 1e-9)};
}

server::ServedModel served_model(engine::ModelRunner& runner, const tokenizer::Tokenizer& tok,
                                 const ServeOptions& o) {
  server::ServedModel m;
  m.id = o.alias.empty() ? std::filesystem::path(o.model.model).stem().string() : o.alias;
  m.tokenizer = &tok;
  if (auto source = runner.file().get_string_or("tokenizer.chat_template")) {
    m.template_source = std::string(*source);
    m.chat_template = chat::Template::parse(m.template_source);
  }
  if (auto id = tok.bos()) m.bos = std::string(tok.token_text(*id));
  if (auto id = tok.eos()) m.eos = std::string(tok.token_text(*id));
  const HParams& hp = runner.hparams();
  m.node_info = {
      {"name", "local"},
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
  };
  if (auto* local = dynamic_cast<engine::LocalRunner*>(&runner)) {
    m.node_info["threads"] = local->pool().size();
    m.node_info["isa"] = std::string(kernels::isa_name(local->isa()));
    m.node_info["kv_cache_bytes"] = local->shard().kv_cache_bytes();
    m.node_info["packed_weight_bytes"] = local->shard().packed_weight_bytes();
    // What GET /api/cluster's one-node view shows of this machine (read once, at load).
    const SystemMemory memory = system_memory();
    m.node_info["cores"] = cpu_cores().logical;
    m.node_info["free_memory_bytes"] = memory.available_bytes;
    m.node_info["total_memory_bytes"] = memory.total_bytes;
  } else if (auto* cluster = dynamic_cast<cluster::ClusterRunner*>(&runner)) {
    // Across nodes: the stages and who runs them (the page lists them).
    m.node_info["name"] = "coordinator";
    m.node_info["threads"] = o.model.threads;
    m.node_info["isa"] = "cluster";
    m.node_info["kv_cache_bytes"] = 0;
    m.node_info["packed_weight_bytes"] = 0;
    nlohmann::json stages = nlohmann::json::array();
    for (const Stage& s : cluster->plan().stages) {
      nlohmann::json ranks = nlohmann::json::array();
      for (const Rank& r : s.ranks) {
        const NodeProfile& node = cluster->nodes()[static_cast<size_t>(r.node)];
        ranks.push_back({{"node", r.node == 0 ? "coordinator" : node.name},
                         {"address", node.address},
                         {"heads", {r.head_begin, r.head_end}},
                         {"memory_bytes", r.memory_bytes}});
      }
      stages.push_back({{"layers", {s.layer_begin, s.layer_end}}, {"ranks", ranks}});
    }
    m.node_info["stages"] = stages;
    m.node_info["parallel"] = cluster->plan().parallel;
    m.cluster_status = [cluster] { return cluster->status(); };
  }
  return m;
}

void serve(const ServeOptions& o) {
  if (o.slots < 1 || o.slots > 256) throw Error("cli", "--slots must be between 1 and 256");
  // Before any thread starts: a bad URL is refused, not found after the model loaded.
  for (const std::string& url : o.hubs) hub::parse_hub_url(url);
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
  server::HttpServer http(o.http, metrics);
  http.bind();
  std::thread http_thread([&] { http.listen(); });
  std::fprintf(stderr, "serve: listening on http://%s:%d (loading %s)\n", o.http.host.c_str(),
               http.port(), o.model.model.c_str());

  std::optional<tokenizer::Tokenizer> tok;
  server::ServedModel model;
  try {
    if (!runner) runner = o.model.open(o.slots);
    tok.emplace(tokenizer::Tokenizer::from_gguf(runner->file()));
    model = served_model(*runner, *tok, o);
  } catch (...) {
    http.stop();
    http_thread.join();
    throw;
  }
  PodSpeed speed;
  if (!o.hubs.empty()) {
    // Measured before the scheduler owns the runner.
    speed = measure_pod_speed(*runner);
    std::fprintf(stderr, "serve: measured %.1f tok/s decode, %.0f tok/s prefill (for the hub)\n",
                 speed.decode_tokens_per_s, speed.prefill_tokens_per_s);
  }
  server::SchedulerOptions so;
  so.max_queue = o.max_queue;
  so.batch_tokens = o.batch_tokens;
  server::Scheduler scheduler(*runner, *tok, so, &metrics);
  std::thread engine_thread([&] {
    try {
      scheduler.run();
    } catch (const std::exception& e) {
      http.set_degraded(std::string("the engine stopped: ") + e.what());
      std::fprintf(stderr, "serve: the engine stopped: %s\n", e.what());
    }
  });
  http.set_model(&model, &scheduler);
  std::fprintf(stderr, "serve: ready: model '%s', %lld slots of %lld tokens; %s\n",
               model.id.c_str(), static_cast<long long>(runner->n_seq()),
               static_cast<long long>(runner->n_ctx()), runner->describe().c_str());
  // One client per hub: replicas of a hub each keep their own pod registry (docs/network.md),
  // so a pod registers with every one and each logs its own registration.
  std::vector<std::unique_ptr<hub::HubClient>> hub_clients;
  if (!o.hubs.empty()) {
    hub::Registration pod;
    pod.name = o.hub_name.empty() ? model.id : o.hub_name;
    pod.url = o.public_url.empty() ? "http://" + o.http.host + ":" + std::to_string(http.port())
                                   : o.public_url;
    pod.models = {{model.id, runner->n_ctx()}};
    pod.slots = static_cast<int32_t>(runner->n_seq());
    pod.decode_tokens_per_s = speed.decode_tokens_per_s;
    pod.prefill_tokens_per_s = speed.prefill_tokens_per_s;
    pod.memory_bytes = system_memory().total_bytes;
    for (const std::string& url : o.hubs) {
      hub_clients.push_back(std::make_unique<hub::HubClient>(
          url, o.model.cluster.security.identity(), pod,
          [](const std::string& line) { std::fprintf(stderr, "serve: %s\n", line.c_str()); },
          o.hub_ca));
    }
  }

  int sig = 0;
  sigwait(&signals, &sig);
  hub_clients.clear();  // no more registrations: each hub drops the pod after its timeout
  std::fprintf(stderr, "serve: %s: finishing the requests in flight\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  http.begin_drain();
  scheduler.shutdown();
  engine_thread.join();
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
  cmd->add_option("--api-key", o->http.api_key, "Require 'Authorization: Bearer KEY' on /v1");
  cmd->add_option("--alias", o->alias, "Model name in the API (default: the file's name)");
  cmd->add_option("--max-body", o->http.max_body_bytes, "Largest request body in bytes")
      ->capture_default_str();
  cmd->add_option("--hub", o->hubs,
                  "Register with a herd hub at http://HOST:PORT (signed with the node identity); "
                  "repeat for each replica of a hub")
      ->take_all();
  cmd->add_option("--public-url", o->public_url,
                  "How the hub's clients reach this server (default: http://--host:--port)");
  cmd->add_option("--hub-name", o->hub_name, "This pod's name at the hub (default: the model's)");
  cmd->add_option(
      "--hub-ca", o->hub_ca,
      "PEM certificate authorities that vouch for an https hub (default: the system's)");
  cmd->callback([o] { serve(*o); });
}

}  // namespace herd::cli
