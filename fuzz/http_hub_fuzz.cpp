// libFuzzer target: raw bytes as a client connection to the hub's HTTP server (a
// GuardedServer with the hub's POST routes), their bodies handled as the hub handles them:
// registrations parsed (hub/registration.h), completion bodies parsed with the depth limit
// and written again as the hub forwards them to a pod. A limit refused (4xx), a
// herd::Error from the parser or a discarded body is expected; a crash, a sanitizer report,
// an allocation over -malloc_limit_mb or a body or headers beyond the limits is a bug.
#include <cstdint>
#include <string_view>

#include "http/bounded_json.h"
#include "http_fuzz.h"
#include "hub/registration.h"
#include "util/error.h"

namespace {

herd::http::GuardedServer& hub_server() {
  static herd::http::GuardedServer* server = [] {
    auto* s = new herd::http::GuardedServer(herd::fuzz::fuzz_limits());
    const auto complete = [s](const httplib::Request& req, httplib::Response& res) {
      herd::fuzz::check_within_limits(req, s->limits());
      const nlohmann::json body = herd::http::parse_bounded_json(req.body);
      if (body.is_discarded() || !body.is_object()) {
        res.status = 400;
        return;
      }
      nlohmann::json forward = body;  // as the hub's complete() copies and sends it
      forward["stream"] = false;
      res.set_content(forward.dump(), "application/json");
    };
    s->Post("/v1/chat/completions", complete);
    s->Post("/v1/completions", complete);
    s->Post("/api/register", [s](const httplib::Request& req, httplib::Response& res) {
      herd::fuzz::check_within_limits(req, s->limits());
      try {
        const herd::hub::Registration r = herd::hub::parse_registration(req.body);
        res.set_content(r.name, "text/plain");
      } catch (const herd::Error&) {
        res.status = 400;
      }
    });
    s->Get("/health", [s](const httplib::Request& req, httplib::Response& res) {
      herd::fuzz::check_within_limits(req, s->limits());
      res.set_content("{\"status\": \"ok\"}", "application/json");
    });
    return s;
  }();
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::serve_bytes(hub_server(),
                          std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
