// `herd hub` (issue 19): the HTTP face of the network. Pods register here and say they are
// alive by registering again (signed: registration.h); the hub keeps them in its router
// (router.h) and shows them. This part serves:
//
//   POST /api/register   a pod's signed registration (X-Herd-Signature); 200 with
//                        {"pod": id, "heartbeat_seconds": n, "control_token": t}, 400
//                        naming a bad field, 403 for a signature that is not the pod's, a
//                        replay or a URL at a private address, 409 for an identity live at
//                        another URL, 429 for too many new pods from one address
//                        (registrar.h). The token (random, kept while the pod is live) is
//                        what the hub shows the pod's POST /api/load: only this hub may make
//                        it load.
//   POST /v1/chat/completions, /v1/completions, /v1/messages, /v1/responses, /api/chat,
//        /api/generate
//                        the whole request to the pod the router chooses for its model,
//                        tried on another when one fails before answering (an API key, as a
//                        bearer token or x-api-key); each API's answers read, billed and
//                        checked by its own reader, its errors in its own shape
//                        (client_api.h)
//                        A model no live pod serves but some can load (demand.h): 503 with
//                        Retry-After while its demand grows and while a pod loads it
//   GET  /v1/models      the models live pods serve (OpenAI's list; an API key when the hub
//                        has keys), then those only loadable: "pods": 0, "loadable_pods": n,
//                        "state": "loadable" or "loading"
//   GET  /api/network    every pod: models, speeds, slots, uptime, round trip, reputation,
//                        requests, tokens, checks, credits; the hub's totals and its replica
//                        id (the prefix of its request ids); the requests flowing (the last
//                        kRecent: network_view.h); each pod's "loadable" models and the one it is
//                        "loading"; "loads": the loads in flight and the demand
//   GET  /api/ledger     the ledger's consistency and the balances of the accounts this hub
//                        knows (credits.h); an operator key (hub_keys.h)
//   GET  /health         {"status": "ok", "pods": n}
//
// A served request is charged (credits.h) once the pod's answer is whole, and a sample is
// checked on another pod (checks.h) by a worker thread; a pod that fails a check (confirmed
// by a second checker when there is one) loses its reputation, so the router avoids it, and
// what it earned and was not yet settled is withheld. The hub measures its round trip to
// each pod (GET /health, a herd answer) every heartbeat. A pod not heard from within pod_timeout is
// dropped; its reputation and counts stay (a pod cannot wash its record by registering again). Not
// yet: https pods.
//
// Who is paid for what (issue 28, docs/network.md "Paying only for checked work"): the bill
// is bounded by the ids (billing.h), checkers are seeds (--trust-pod) and pods they proved
// (checks.h), only trusted pods are paid, speeds are measured (speed.h), and the pods'
// records are kept in the database (pod_records.h).
//
// Inside, the hub's state lives in rooms, each with its own lock and a header stating its
// contract: the pod table (pod_table.h: live pods, records, model ids, the router), the
// verifier (verifier.h: the check queue, its worker, verdicts), the loads (loads.h: models no
// pod serves), the public view (network_view.h) and the one maker of pod clients
// (pod_clients.h). This server routes requests between them. The pod table's lock is the
// innermost: the others may call it while holding theirs, never the reverse.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/limits.h"
#include "hub/checks.h"
#include "hub/credits.h"
#include "hub/demand.h"

namespace herd::hub {

class Ledger;
class PodRecords;

struct HubOptions {
  std::string host = "127.0.0.1";
  int port = 8090;                         // 0: any free port (see HubServer::port())
  std::vector<std::string> api_keys;       // empty: no authentication for clients
  std::vector<std::string> operator_keys;  // may read GET /api/ledger (hub_keys.h)
  std::string secret;  // names clients' accounts (hub_keys.h); empty: random (tests)
  std::chrono::seconds heartbeat{10};    // how often pods are asked to register again
  std::chrono::seconds pod_timeout{30};  // silence after which a pod is dropped
  int64_t max_clock_skew_ms = 5 * 60 * 1000;
  // Pods at private, loopback, link-local or reserved addresses (pod_address.h): refused
  // unless true (a pod network on a LAN; tests on loopback).
  bool allow_private_pods = false;
  double new_pods_per_minute = 30;  // registrations adding a pod, per client address (0: any)
  // Bodies, headers, deadlines and connections (http/limits.h: 8 MiB, 256 and 32 an address).
  http::HttpLimits http_limits;
  Prices prices;
  int64_t grant_credits = 1'000'000;  // granted to each API key's account, once
  double check_rate = 0.1;            // of requests checked, after a pod's first ones
  CheckThresholds thresholds;
  std::chrono::seconds settle_period{3600};  // pending credits of good pods are paid
  uint64_t seed = 0;                         // the check sampler's (0: random)
  int64_t requests_per_minute = 0;           // per API key (0: no limit); 429 beyond
  std::string tls_cert, tls_key;             // PEM files: the hub serves HTTPS
  std::string pod_ca_file;                   // to check https pods (empty: the system's)
  DemandOptions demand;  // when pods are asked to load a model no pod serves (demand.h)
  // Node ids of the pods trusted as checkers from the start (--trust-pod): the root of the
  // network's trust (checks.h: may_check). None: no pod checks, and none is paid.
  std::vector<std::string> trusted_pods;
};

class HubServer {
 public:
  // REQUIRES: `ledger` and `records` outlive the server. Grants each API key its credits.
  // `records`: where the pods' records are kept (nullptr: in memory only; pod_records.h
  // wants a database connection of its own).
  HubServer(HubOptions options, Ledger& ledger, PodRecords* records = nullptr);
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
  // What GET /api/ledger answers.
  nlohmann::json ledger() const;
  // Drops pods silent for longer than pod_timeout (the server calls it every second).
  void expire_silent_pods();
  // Waits until every check queued so far was done (tests), up to `timeout`.
  bool wait_checks(std::chrono::milliseconds timeout);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace herd::hub
