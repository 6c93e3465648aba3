// herd hub: the network's hub (issue 19; docs/network.md). Pods register with a signed
// registration and register again as their heartbeat; clients' completions go whole to a
// pod the router chooses, are charged to their key's credits and sampled for checks on
// other pods; GET /api/network shows every pod. A model no pod serves that a pod can load
// is loaded there once --load-after requests asked for it (hub/demand.h). The books are kept
// in --db (SQLite or PostgreSQL); clients' accounts there are named under --secret-file, and
// only an operator key (--operator-key-file) reads them (hub/hub_keys.h).
// Serves until SIGINT or SIGTERM.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/http_limit_options.h"
#include "hub/database.h"
#include "hub/hub_keys.h"
#include "hub/hub_server.h"
#include "hub/ledger.h"
#include "hub/pod_records.h"
#include "net/api_keys.h"
#include "util/error.h"

namespace herd::cli {
namespace {

struct HubArgs {
  hub::HubOptions hub;
  int heartbeat_seconds = 10;
  int pod_timeout_seconds = 30;
  int settle_seconds = 3600;
  int load_window_seconds = 60;
  int load_timeout_seconds = 600;
  std::string listen;
  std::string db;
  std::string api_key_file, operator_key_file, secret_file;
};

// The books' default place: $XDG_DATA_HOME/herd/hub.db, else ~/.local/share/herd/hub.db.
std::string default_db() {
  std::filesystem::path dir;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) {
    dir = data;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::filesystem::path(home) / ".local" / "share";
  } else {
    throw Error("hub", "no place for the hub's books: give --db PATH");
  }
  dir /= "herd";
  std::filesystem::create_directories(dir);
  return (dir / "hub.db").string();
}

// The keys of the files (beside any --api-key) and the accounts' secret. Replicas on one
// PostgreSQL must name accounts alike: there, the secret file is not left to a default.
void load_keys(HubArgs& a, bool postgres) {
  if (!a.hub.api_keys.empty()) {
    std::fprintf(stderr,
                 "hub: --api-key shows its keys to every user of this machine (the process "
                 "list); --api-key-file keeps them private\n");
  }
  if (!a.api_key_file.empty()) {
    for (std::string& key : net::read_key_file(a.api_key_file)) {
      a.hub.api_keys.push_back(std::move(key));
    }
  }
  if (!a.operator_key_file.empty()) a.hub.operator_keys = net::read_key_file(a.operator_key_file);
  if (a.secret_file.empty()) {
    if (postgres) {
      throw Error("hub",
                  "--db postgresql://... needs --secret-file PATH, the same file for every "
                  "replica: clients' accounts are named under it");
    }
    a.secret_file =
        hub::default_hub_secret_path(std::getenv("XDG_DATA_HOME"), std::getenv("HOME")).string();
  }
  a.hub.secret = hub::load_or_create_hub_secret(a.secret_file);
}

void run_hub(HubArgs& a) {
  if (!a.listen.empty()) {
    const size_t colon = a.listen.rfind(':');
    const std::string port = colon == std::string::npos ? "" : a.listen.substr(colon + 1);
    if (colon == std::string::npos || colon == 0 || port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
      throw Error("hub", "--listen '" + a.listen + "': expected HOST:PORT, the port 0-65535");
    }
    a.hub.host = a.listen.substr(0, colon);
    a.hub.port = std::stoi(port);
  }
  a.hub.settle_period = std::chrono::seconds(a.settle_seconds);
  a.hub.heartbeat = std::chrono::seconds(a.heartbeat_seconds);
  a.hub.pod_timeout = std::chrono::seconds(a.pod_timeout_seconds);
  a.hub.demand.window = std::chrono::seconds(a.load_window_seconds);
  a.hub.demand.load_timeout = std::chrono::seconds(a.load_timeout_seconds);
  if (a.pod_timeout_seconds <= a.heartbeat_seconds) {
    throw Error("hub", "--pod-timeout (" + std::to_string(a.pod_timeout_seconds) +
                           " s) must be longer than --heartbeat (" +
                           std::to_string(a.heartbeat_seconds) + " s)");
  }
  // SIGINT and SIGTERM are taken by sigwait() below; the server's threads inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  if (a.db.empty()) a.db = default_db();
  const bool postgres = a.db.rfind("postgres", 0) == 0;  // its URI may hold a password
  load_keys(a, postgres);
  const std::unique_ptr<hub::Database> db = hub::open_database(a.db);
  hub::Ledger ledger(*db);
  // The pods' records on a connection of their own (a connection serves one thread at once).
  const std::unique_ptr<hub::Database> records_db = hub::open_database(a.db);
  hub::PodRecords records(*records_db);
  hub::HubServer server(a.hub, ledger, &records);
  server.bind();
  std::thread http([&] { server.listen(); });
  std::fprintf(stderr, "hub: books in %s\n", postgres ? "PostgreSQL" : a.db.c_str());
  std::fprintf(stderr, "hub: listening on %s://%s:%d (%zu API key%s)\n",
               a.hub.tls_cert.empty() ? "http" : "https", a.hub.host.c_str(), server.port(),
               a.hub.api_keys.size(), a.hub.api_keys.size() == 1 ? "" : "s");
  std::fprintf(stderr, "hub: %zu operator key%s; accounts named under the secret in %s\n",
               a.hub.operator_keys.size(), a.hub.operator_keys.size() == 1 ? "" : "s",
               a.secret_file.c_str());
  if (a.hub.trusted_pods.empty()) {
    std::fprintf(stderr, "hub: no --trust-pod: no pod may check another, and none is paid\n");
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "hub: stopping\n");
  server.stop();
  http.join();
}

}  // namespace

void add_hub(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "hub", "The network's hub: pods register, clients see the models they serve");
  auto a = std::make_shared<HubArgs>();
  cmd->add_option("--host", a->hub.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->hub.port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (instead of --host, --port)");
  cmd->add_option("--tls-cert", a->hub.tls_cert, "PEM certificate: serve HTTPS (with --tls-key)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", a->hub.tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  cmd->add_option("--pod-ca", a->hub.pod_ca_file,
                  "PEM certificate authorities that vouch for https pods (default: the system's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--rate-limit", a->hub.requests_per_minute,
                  "Requests a minute per API key (per address without keys); 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--allow-private-pods", a->hub.allow_private_pods,
                "Accept pods at private, loopback and link-local addresses (a LAN; tests)");
  cmd->add_option("--new-pods-per-minute", a->hub.new_pods_per_minute,
                  "Registrations of new pods a minute per client address; 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--db", a->db,
                  "The books (credits ledger): a SQLite file (default: "
                  "$XDG_DATA_HOME/herd/hub.db) or postgresql://... (several hubs, one state)");
  cmd->add_option("--trust-pod", a->hub.trusted_pods,
                  "A pod's node id (herd node --show-id) trusted as a checker from the start; "
                  "repeat for each. Without one no pod checks others, and none is paid");
  cmd->add_option("--credits", a->hub.grant_credits,
                  "Credits granted to each API key's account, once")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt-price", a->hub.prices.prompt_token, "Credits per prompt token")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--completion-price", a->hub.prices.completion_token,
                  "Credits per generated token")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--fee-percent", a->hub.prices.fee_percent,
                  "The hub's part of the generated tokens' price")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  cmd->add_option("--check-rate", a->hub.check_rate,
                  "Share of requests checked on another pod (each pod's first " +
                      std::to_string(hub::kAlwaysChecked) + " always are)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-probability", a->hub.thresholds.min_probability,
                  "A sampled token is plausible when the checker gives it at least this")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-z", a->hub.thresholds.min_z,
                  "Sampled tokens are plausible together when their z (checks.h) is at least this")
      ->capture_default_str();
  cmd->add_option("--min-sampled-tokens", a->hub.thresholds.min_sampled_tokens,
                  "A check of fewer sampled tokens proves nothing when it passes: the pod earns "
                  "no trust by it, and a new pod's answer goes to another pod")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--greedy-gap", a->hub.thresholds.greedy_gap,
                  "A greedy token is plausible when its logit is within this of the best")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--settle", a->settle_seconds, "Seconds between payments of pending credits")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400 * 30));
  cmd->add_option("--api-key", a->hub.api_keys,
                  "A client key ('Authorization: Bearer KEY'); repeat for several. Every user "
                  "of the machine sees it: prefer --api-key-file")
      ->take_all();
  cmd->add_option("--api-key-file", a->api_key_file,
                  "Client keys, one a line (# comments); a private file (not world-readable)");
  cmd->add_option("--operator-key-file", a->operator_key_file,
                  "Operator keys, one a line: the only keys that read GET /api/ledger (a client "
                  "key reads its own account's history); without one no one reads it");
  cmd->add_option("--secret-file", a->secret_file,
                  "The secret clients' account names are HMACs under (created, mode 0600, when "
                  "missing; default: beside the default --db, hub.secret). The same file for "
                  "every replica");
  cmd->add_option("--heartbeat", a->heartbeat_seconds,
                  "Seconds between a pod's registrations, as the hub asks")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--pod-timeout", a->pod_timeout_seconds,
                  "Seconds of silence after which a pod is dropped")
      ->capture_default_str()
      ->check(CLI::Range(2, 86400));
  cmd->add_option("--load-after", a->hub.demand.load_after,
                  "Requests within --load-window for a model no pod serves that make the hub ask "
                  "a pod that can load it (herd serve --models-dir); 0: never")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--load-window", a->load_window_seconds,
                  "Seconds over which requests for a model no pod serves are counted")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--load-timeout", a->load_timeout_seconds,
                  "Seconds after which a load a pod did not finish is given up")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  add_http_limit_options(*cmd, a->hub.http_limits);
  cmd->callback([a] { run_hub(*a); });
}

}  // namespace herd::cli
