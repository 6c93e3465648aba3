// herd node --listen HOST:PORT [--threads N] [--name NAME] [--key FILE] [--insecure-listen]
//           [--cache-dir DIR] [--no-model-files]
// A worker: waits for a coordinator (`herd run/eval/bench/serve --peers ...`), reports
// this machine's profile, loads the shard it is given and serves it. Runs until SIGINT or
// SIGTERM. Log lines go to stderr.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cluster/node.h"
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
  std::string isa = "auto";
  double bandwidth_gbs = 0;
  double matmul_gflops = 0;
};

void log_line(std::string_view line) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
  std::fprintf(stderr, "%s herd node: %.*s\n", stamp, static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
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
                "Never map a model file the coordinator names; receive the weights");
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
  cmd->callback([a] {
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
    o.cache_dir = a->cache_dir;
    o.use_model_files = !a->no_model_files;
    o.bandwidth_gbs = a->bandwidth_gbs;
    o.matmul_gflops = a->matmul_gflops;
    ModelOptions isa;
    isa.isa = a->isa;
    o.isa_limit = isa.local_options(1).isa_limit;
    o.log = log_line;
    if (!o.key) log_line("no cluster key: insecure mode (peers are not authenticated)");

    cluster::NodeServer server(std::move(o));
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::thread watcher([&server] {
      while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      server.stop();
    });
    server.run();
    g_stop = true;
    watcher.join();
    log_line("stopped");
  });
}

}  // namespace herd::cli
