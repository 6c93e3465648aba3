// `herd hub` (issue 19): the HTTP face of the network. Pods register here and say they are
// alive by registering again (signed: registration.h); the hub keeps them in its router
// (router.h) and shows them. This part serves:
//
//   POST /api/register   a pod's signed registration (X-Herd-Signature); 200 with
//                        {"pod": id, "heartbeat_seconds": n}, 400 naming a bad field, 403
//                        for a signature that is not the pod's or a replay
//   POST /v1/chat/completions, /v1/completions
//                        the whole request to the pod the router chooses for its model,
//                        tried on another when one fails before answering (an API key)
//   GET  /v1/models      the models live pods serve (OpenAI's list; an API key when the hub
//                        has keys)
//   GET  /api/network    every live pod: models, speeds, slots, uptime, reputation
//   GET  /health         {"status": "ok", "pods": n}
//
// A pod not heard from within pod_timeout is dropped. Not yet: charging through the ledger,
// the hub's own round-trip probes (the router is told 0), https pods.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace herd::hub {

struct HubOptions {
  std::string host = "127.0.0.1";
  int port = 8090;                       // 0: any free port (see HubServer::port())
  std::vector<std::string> api_keys;     // empty: no authentication for clients
  std::chrono::seconds heartbeat{10};    // how often pods are asked to register again
  std::chrono::seconds pod_timeout{30};  // silence after which a pod is dropped
  int64_t max_clock_skew_ms = 5 * 60 * 1000;
  int http_threads = 16;
};

class HubServer {
 public:
  explicit HubServer(HubOptions options);
  ~HubServer();
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  // Binds the listening socket. Throws herd::Error("hub", ...) when it cannot.
  void bind();
  int port() const;
  // Serves until stop(). Call after bind(), from its own thread.
  void listen();
  void stop();

  // What GET /api/network answers (for tests and the page to come).
  nlohmann::json network() const;
  // Drops pods silent for longer than pod_timeout (the server calls it every second).
  void expire_silent_pods();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace herd::hub
