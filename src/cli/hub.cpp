// herd hub: the network's hub (issue 19; docs/network.md). Pods register with a signed
// registration and register again as their heartbeat; clients' completions go whole to a
// pod the router chooses; GET /api/network shows every pod. Serves until SIGINT or SIGTERM.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "hub/hub_server.h"
#include "util/error.h"

namespace herd::cli {
namespace {

struct HubArgs {
  hub::HubOptions hub;
  int heartbeat_seconds = 10;
  int pod_timeout_seconds = 30;
};

void run_hub(HubArgs& a) {
  a.hub.heartbeat = std::chrono::seconds(a.heartbeat_seconds);
  a.hub.pod_timeout = std::chrono::seconds(a.pod_timeout_seconds);
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

  hub::HubServer server(a.hub);
  server.bind();
  std::thread http([&] { server.listen(); });
  std::fprintf(stderr, "hub: listening on http://%s:%d (%zu API key%s)\n", a.hub.host.c_str(),
               server.port(), a.hub.api_keys.size(), a.hub.api_keys.size() == 1 ? "" : "s");
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
  cmd->add_option("--api-key", a->hub.api_keys,
                  "A client key ('Authorization: Bearer KEY'); repeat for several")
      ->take_all();
  cmd->add_option("--heartbeat", a->heartbeat_seconds,
                  "Seconds between a pod's registrations, as the hub asks")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--pod-timeout", a->pod_timeout_seconds,
                  "Seconds of silence after which a pod is dropped")
      ->capture_default_str()
      ->check(CLI::Range(2, 86400));
  cmd->callback([a] { run_hub(*a); });
}

}  // namespace herd::cli
