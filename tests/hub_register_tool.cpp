// A test-only client for tests/hostile_hub_register_test.sh: signed registrations as an
// attacker would send them (python3 has no Ed25519 here), and a plain HTTP server that is
// not herd.
//
//   hub_register_tool post HUB POD_URL IDENTITY [TIME_MS]
//       registers POD_URL with the identity in the file IDENTITY (made when absent), time_ms
//       TIME_MS (default: now); prints the status and the answer's body on one line
//   hub_register_tool replay HUB POD_URL IDENTITY
//       the same signed registration twice; prints both statuses
//   hub_register_tool flood HUB POD_URL N M
//       N new identities, each serving M models of names of its own; prints "STATUS COUNT"
//       for each status answered (0: no answer)
//   hub_register_tool plain PORT_FILE
//       serves "hello" (not herd's /health) on a free loopback port, written to PORT_FILE
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "hub/registration.h"
#include "net/identity.h"

namespace {

using herd::hub::Registration;
using herd::net::NodeIdentity;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Registration pod(const NodeIdentity& identity, const std::string& url, int models,
                 int64_t time_ms) {
  Registration r;
  r.id = identity.id();
  r.name = "hostile";
  r.url = url;
  const std::string prefix = identity.id().to_text().substr(0, 12);
  for (int i = 0; i < models; ++i)
    r.models.push_back({prefix + "-model-" + std::to_string(i), 4096});
  r.slots = 1;
  r.decode_tokens_per_s = 10;
  r.prefill_tokens_per_s = 100;
  r.time_ms = time_ms;
  return r;
}

httplib::Result post(httplib::Client& hub, const NodeIdentity& identity, const std::string& body) {
  return hub.Post(
      "/api/register",
      httplib::Headers{{"X-Herd-Signature", herd::hub::sign_registration(identity, body)}}, body,
      "application/json");
}

int usage() {
  std::fprintf(stderr,
               "usage: hub_register_tool post HUB POD_URL IDENTITY [TIME_MS]\n"
               "       hub_register_tool replay HUB POD_URL IDENTITY\n"
               "       hub_register_tool flood HUB POD_URL N M\n"
               "       hub_register_tool plain PORT_FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  try {
    if (mode == "plain") {
      httplib::Server server;
      server.Get(".*", [](const httplib::Request&, httplib::Response& res) {
        res.set_content("hello", "text/plain");
      });
      const int port = server.bind_to_any_port("127.0.0.1");
      std::ofstream(argv[2]) << port << "\n";
      server.listen_after_bind();
      return 0;
    }
    if (argc < 5) return usage();
    httplib::Client hub(argv[2]);
    hub.set_connection_timeout(5);
    hub.set_read_timeout(10);
    const std::string url = argv[3];
    if (mode == "post" || mode == "replay") {
      const NodeIdentity identity = NodeIdentity::load_or_create(argv[4]);
      const int64_t time_ms = argc > 5 ? std::stoll(argv[5]) : unix_ms();
      const std::string body = herd::hub::registration_body(pod(identity, url, 1, time_ms));
      const int times = mode == "replay" ? 2 : 1;
      for (int i = 0; i < times; ++i) {
        const httplib::Result r = post(hub, identity, body);
        if (mode == "post") {
          std::printf("%d %s\n", r ? r->status : 0, r ? r->body.c_str() : "");
        } else {
          std::printf(i == 0 ? "%d" : " %d\n", r ? r->status : 0);
        }
      }
      return 0;
    }
    if (mode == "flood" && argc >= 6) {
      const int n = std::stoi(argv[4]), m = std::stoi(argv[5]);
      std::map<int, int> statuses;
      for (int i = 0; i < n; ++i) {
        const NodeIdentity identity = NodeIdentity::generate();
        const httplib::Result r =
            post(hub, identity, herd::hub::registration_body(pod(identity, url, m, unix_ms())));
        ++statuses[r ? r->status : 0];
      }
      for (const auto& [status, count] : statuses) std::printf("%d %d\n", status, count);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hub_register_tool: %s\n", e.what());
    return 1;
  }
  return usage();
}
