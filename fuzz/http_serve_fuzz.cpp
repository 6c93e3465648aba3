// libFuzzer target: raw bytes as a client connection to serve's HTTP server (a GuardedServer
// with serve's POST routes), their bodies parsed as serve parses them: chat and completion
// requests (server/request.h: an ApiError 400 is the refusal), /api/verify's and /api/load's
// bodies with the depth limit and written again. A crash, a sanitizer report, an exception of
// another kind, an allocation over -malloc_limit_mb or a body or headers beyond the limits
// is a bug.
#include <cstdint>
#include <string_view>

#include "http/bounded_json.h"
#include "http_fuzz.h"
#include "server/request.h"

namespace {

template <class Parse>
httplib::Server::Handler parsed_by(herd::http::GuardedServer* s, Parse parse) {
  return [s, parse](const httplib::Request& req, httplib::Response& res) {
    herd::fuzz::check_within_limits(req, s->limits());
    try {
      parse(req.body);
      res.set_content("{}", "application/json");
    } catch (const herd::server::ApiError& e) {
      if (e.status() != 400) __builtin_trap();
      res.status = 400;
    }
  };
}

herd::http::GuardedServer& serve_server() {
  static herd::http::GuardedServer* server = [] {
    auto* s = new herd::http::GuardedServer(herd::fuzz::fuzz_limits());
    s->Post("/v1/chat/completions",
            parsed_by(s, [](const std::string& b) { herd::server::parse_chat_request(b); }));
    s->Post("/v1/completions",
            parsed_by(s, [](const std::string& b) { herd::server::parse_completion_request(b); }));
    const auto json_body = [s](const httplib::Request& req, httplib::Response& res) {
      herd::fuzz::check_within_limits(req, s->limits());
      const nlohmann::json body = herd::http::parse_bounded_json(req.body);
      if (body.is_discarded()) {
        res.status = 400;
        return;
      }
      res.set_content(body.dump(), "application/json");
    };
    s->Post("/api/verify", json_body);
    s->Post("/api/load", json_body);
    s->Get("/health", [s](const httplib::Request& req, httplib::Response& res) {
      herd::fuzz::check_within_limits(req, s->limits());
      res.set_content("{\"status\": \"ready\"}", "application/json");
    });
    return s;
  }();
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::serve_bytes(serve_server(),
                          std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
