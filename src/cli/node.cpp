// herd node --listen HOST:PORT [--threads N] [--name NAME] [--key FILE] [--insecure-listen]
//           [--identity FILE] [--allow-ids FILE] [--insecure] [--show-id]
//           [--cache-dir DIR] [--models-dir DIR] [--no-model-files] [--no-advertise]
// A worker: waits for a coordinator (`herd run/eval/bench/serve --peers ...`), reports
// this machine's profile, loads the shard it is given and serves it. Advertises itself on
// the LAN with DNS-SD (net/discovery.h) for `--peers auto` and `herd nodes`, unless there
// is no mDNS daemon (it says so once and runs anyway). Runs until SIGINT or SIGTERM. Log
// lines go to stderr.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/store_options.h"
#include "cluster/node.h"
#include "cluster/weight_cache.h"
#include "engine/device_placement.h"
#include "net/discovery.h"
#include "util/error.h"

namespace herd::cli {
namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) {
  g_stop = true;
}

struct NodeArgs {
  std::string listen = "127.0.0.1:7070";
  std::string name;
  int threads = 0;
  std::string key_file;
  bool insecure_listen = false;
  std::string cache_dir;
  bool no_model_files = false;
  StoreFlags store;  // where this node finds models of its own (--models-dir, HERD_MODEL_PATH)
  std::string isa = "auto";
  std::string device = "auto";
  std::string experts = "auto";
  int64_t device_layers = -1;
  double bandwidth_gbs = 0;
  double matmul_gflops = 0;
  uint64_t memory_bytes = 0;
  bool no_advertise = false;
  int64_t test_link_delay_us = 0;
  SecurityFlags security;
  bool show_id = false;
};

void log_line(std::string_view line) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
  std::fprintf(stderr, "%s herd node: %.*s\n", stamp, static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
}

// This node on the LAN: its advertiser (null when it cannot advertise: logged once) and
// what it says, kept so that refresh() can say it again when the cache changes.
struct LanPresence {
  std::unique_ptr<net::NodeAdvertiser> advertiser;
  net::NodeAdvert advert;
  std::filesystem::path cache;  // empty: none (no cache directory)

  // The cached models, newest first, as the TXT record lists them.
  void read_cache() {
    if (cache.empty()) return;
    advert.models = cluster::cached_models(cache);
    advert.n_models = advert.models.size();
    for (std::string& m : advert.models) m.resize(net::kModelHashPrefixChars);
  }
  // Says the cached models again when they changed (a model was received). Cheap: one
  // directory listing.
  void refresh() {
    if (!advertiser) return;
    const std::vector<std::string> before = advert.models;
    const uint64_t n_before = advert.n_models;
    read_cache();
    if (advert.models == before && advert.n_models == n_before) return;
    try {
      advertiser->update(advert);
    } catch (const Error& e) {
      log_line(std::string(e.what()) + "; the LAN still sees the old model list");
    }
  }
};

LanPresence advertise(const cluster::NodeServer& server, const cluster::NodeOptions& o) {
  const NodeProfile& p = server.profile();
  LanPresence lan;
  lan.advert.name = p.name;
  lan.advert.cluster = net::cluster_id(o.key.get());
  if (o.identity) lan.advert.id = o.identity->id().to_text();
  lan.advert.cores = p.cores;
  lan.advert.free_memory_bytes = p.free_memory_bytes;
  lan.advert.bandwidth_gbs = p.bandwidth_gbs;
  try {
    lan.cache = o.cache_dir.empty() ? cluster::default_cache_dir() : o.cache_dir;
  } catch (const Error&) {
    // No cache directory: nothing cached to say.
  }
  lan.read_cache();
  try {
    lan.advertiser =
        std::make_unique<net::NodeAdvertiser>(p.name, o.host, server.port(), lan.advert, log_line);
    log_line("advertised on the LAN as '" + p.name + "' (" + net::kServiceType + ", cluster " +
             lan.advert.cluster + ")");
  } catch (const Error& e) {
    log_line(std::string(e.what()) + "; not advertised on the LAN");
  }
  return lan;
}

}  // namespace

void add_node(CLI::App& app) {
  auto* cmd = app.add_subcommand("node", "Serve this machine's memory and cores to a coordinator");
  auto a = std::make_shared<NodeArgs>();
  cmd->add_option("-l,--listen", a->listen, "Address to listen on (HOST:PORT)")
      ->capture_default_str();
  cmd->add_option("--name", a->name, "Node name (default: host name and port)");
  cmd->add_option("-t,--threads", a->threads,
                  "Threads (default: the performance cores, else all cores)");
  cmd->add_option("--key", a->key_file, "Cluster key file (default: $HERD_KEY)");
  cmd->add_flag("--insecure-listen", a->insecure_listen,
                "Without a key, listen on a non-loopback address anyway");
  cmd->add_option("--cache-dir", a->cache_dir,
                  "Where received weights are kept (default: $XDG_CACHE_HOME/herd)");
  cmd->add_flag("--no-model-files", a->no_model_files,
                "Never map a model file (this node's copy or the coordinator's); receive the "
                "weights");
  a->store.add_to(*cmd);
  cmd->add_option("--device", a->device,
                  "Where this node's part of a model runs: auto (a GPU that can run it, else "
                  "the CPU), cpu, vulkan, vulkan:N (herd devices lists them)")
      ->capture_default_str();
  cmd->add_option("--experts", a->experts,
                  "A part of an MoE model on a GPU: cpu keeps its routed experts on the CPU and "
                  "the rest on the GPU (unless the plan splits the part itself); auto, device: "
                  "as the plan says")
      ->capture_default_str();
  cmd->add_option("--device-layers", a->device_layers,
                  "A part on a GPU: its first N layers there, the rest on the CPU (unless the "
                  "plan splits the part itself)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--isa", a->isa, "Kernel instruction set: auto, scalar, avx2, avx512")
      ->capture_default_str();
  cmd->add_option("--bandwidth", a->bandwidth_gbs,
                  "Memory read bandwidth to report (GB/s) instead of measuring it: for nodes "
                  "that share a machine, whose probes would slow each other")
      ->check(CLI::Range(0.01, 1e5));
  cmd->add_option("--matmul", a->matmul_gflops,
                  "Q4_0 matrix product speed to report (GFLOP/s) instead of measuring it: for "
                  "nodes that share a machine, whose measurements would differ by load")
      ->check(CLI::Range(0.01, 1e6));
  cmd->add_option("--memory", a->memory_bytes,
                  "Memory the node offers models at most (e.g. 512M, 16G; default: what is "
                  "free): keeps room for other work, or gives a test a node too small")
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--test-link-delay-us", a->test_link_delay_us,
                  "Test only: every frame this node sends is late by this much (a slower link)")
      ->group("")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  cmd->add_flag("--no-advertise", a->no_advertise,
                "Do not advertise this node on the LAN (DNS-SD) for --peers auto");
  a->security.add_to(*cmd);
  cmd->add_flag("--show-id", a->show_id,
                "Print this node's id (for peers' --allow-ids; the identity is created on "
                "first use) and exit");
  cmd->callback([a] {
    if (a->show_id) {
      std::printf("%s\n", a->security.identity()->id().to_text().c_str());
      return;
    }
    cluster::NodeOptions o;
    const size_t colon = a->listen.rfind(':');
    if (colon == std::string::npos) throw Error("cli", "--listen wants HOST:PORT");
    o.host = a->listen.substr(0, colon);
    if (o.host.size() >= 2 && o.host.front() == '[' && o.host.back() == ']')
      o.host = o.host.substr(1, o.host.size() - 2);
    try {
      const int port = std::stoi(a->listen.substr(colon + 1));
      if (port < 0 || port > 65535) throw std::out_of_range("port");
      o.port = static_cast<uint16_t>(port);
    } catch (const std::exception&) {
      throw Error("cli", "--listen: '" + a->listen.substr(colon + 1) + "' is not a port");
    }
    o.name = a->name;
    o.threads = a->threads;
    ClusterFlags flags;
    flags.key_file = a->key_file;
    o.key = flags.key();
    o.insecure_listen = a->insecure_listen;
    o.identity = a->security.identity();
    o.allowed_ids = a->security.allowed_ids();
    o.plaintext = a->security.insecure;
    o.cache_dir = a->cache_dir;
    o.use_model_files = !a->no_model_files;
    try {
      o.own_store = a->store.open();
    } catch (const Error& e) {
      log_line(std::string(e.what()) + ": no model store of its own");
    }
    o.bandwidth_gbs = a->bandwidth_gbs;
    o.matmul_gflops = a->matmul_gflops;
    o.memory_limit_bytes = a->memory_bytes;
    o.test_link_delay = std::chrono::microseconds(a->test_link_delay_us);
    ModelOptions isa;
    isa.isa = a->isa;
    o.isa_limit = isa.local_options(1).isa_limit;
    o.device = a->device;
    engine::parse_experts_choice(a->experts);  // refused here, not at the first load
    o.experts = a->experts;
    o.device_layers = a->device_layers;
    o.log = log_line;
    if (!o.key) log_line("no cluster key: insecure mode (peers are not authenticated)");
    log_line("node id " + o.identity->id().to_text() +
             (o.allowed_ids
                  ? ", accepting " + std::to_string(o.allowed_ids->ids().size()) + " allowed id(s)"
                  : "") +
             (o.plaintext ? "; --insecure: frames are not encrypted" : ""));

    cluster::NodeServer server(o);
    LanPresence lan;
    if (!a->no_advertise) lan = advertise(server, o);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::thread watcher([&server, &lan] {
      for (int tick = 1; !g_stop; ++tick) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (tick % 50 == 0) lan.refresh();  // every 5 s
      }
      server.stop();
    });
    server.run();
    g_stop = true;
    watcher.join();
    log_line("stopped");
  });
}

}  // namespace herd::cli
