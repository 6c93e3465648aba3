// GuardedServer: cpp-httplib's Server (0.11, Debian's) with the limits of HttpLimits held
// for every request, whatever its framing, and for every client. The library alone checks a
// body's size only when it comes with Content-Length: a chunked body, one without a length
// or a gzip body inflating 1000 times is read whole; a client that trickles its headers holds
// a pool thread for ever; a POST to a path without a handler has its body read anyway.
//
// What this class changes (docs/server.md, "Limits of the HTTP servers"):
//  - Each connection is read through a GuardedStream: headers within max_header_bytes and
//    header_timeout of the request's first byte (else 431 or 408 and the connection ends),
//    the body within max_body_bytes (chunk framing counted, body_framing_allowance()) and
//    body_timeout (else 413 or 408): no read past a limit happens, so no request can make
//    the server hold more than its limits of it.
//  - Before a body is read (httplib's pre-routing hook): Content-Length over the limit is
//    413; Content-Encoding other than identity is 415 (never inflated: no herd client
//    compresses requests, and an inflater's output is what a bomb is made of); a body for a
//    method or path with no POST handler is 404; a POST with neither Content-Length nor
//    chunking is 411; both at once, or two lengths, 400. Each refusal closes the connection
//    (its body is left unread). A DELETE with neither Content-Length nor chunking has no body
//    (RFC 9112 6.3; the openai npm client sends its DELETEs so), but httplib would read one
//    to the connection's end: such a request to a route of this class's Delete() is answered
//    here, without reading. Errors are JSON, as OpenAI's:
//    {"error": {"message", "type", "param", "code"}}.
//  - A thread per connection (up to max_connections and a few for refusals), not a queue:
//    a connection never waits behind held threads, so the caps act when it arrives. At a
//    cap (per address or in total), the oldest connection that has not finished its
//    request's headers is evicted first (ConnectionTable); with none, 503 and close.
//  - Handler exceptions answer 500 (an exception handler is set; a server may set its own);
//    anything else a connection's thread throws (a response's content provider) is caught,
//    written to stderr and ends that connection only.
//
// REQUIRES: POST and DELETE routes are registered through this class's Post() and Delete(),
// not through an httplib::Server& (a POST to a path no recorded pattern matches is refused
// unread: fail closed). The pre- and post-routing handlers are this class's: do not set them.
// set_payload_max_length() and new_task_queue are set here from the limits.
#pragma once

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <httplib.h>

#include "http/connection_table.h"
#include "http/limits.h"

namespace herd::http {

class GuardedStream;
class TlsContext;

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(HttpLimits limits);
  ~GuardedServer() override;

  // Serves HTTPS with this certificate chain and private key (PEM files). Throws
  // herd::Error("[http] ...") when they cannot be used, or without OpenSSL.
  void use_tls(const std::string& cert_file, const std::string& key_file);

  // As httplib's Post(), and recorded: bodies are read for these paths only.
  GuardedServer& Post(const std::string& pattern, Handler handler);
  // As httplib's Delete(), for requests without a body (a body is refused, 404).
  GuardedServer& Delete(const std::string& pattern, Handler handler);

  // Serves one accepted connection on `fd` and closes it, as the listening loop does (tests
  // and fuzz targets hand it one end of a socketpair). false: a request failed.
  bool serve_socket(int fd) { return process_and_close_socket(fd); }

  // As httplib's stop(), and connections that have not sent a whole request are dropped, so
  // listen() returns once the requests being answered are (not after the header deadline).
  // Hides httplib::Server::stop(): call it through this class.
  void stop();

  const HttpLimits& limits() const { return limits_; }
  ConnectionTable::Counts connections() const { return table_.counts(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // One connection's requests, kept alive as httplib does; false when one failed.
  bool serve_connection(GuardedStream& stream, ConnectionTable::Entry& entry);
  HandlerResponse screen(const httplib::Request& req, httplib::Response& res) const;
  bool has_post_route(const std::string& path) const;
  // Answers a DELETE without a body by its route (see above); false when none matches.
  bool answer_bodiless_delete(const httplib::Request& req, httplib::Response& res) const;

  HttpLimits limits_;
  ConnectionTable table_;
  std::vector<std::regex> post_routes_;                        // set before listen(), read after
  std::vector<std::pair<std::regex, Handler>> delete_routes_;  // as post_routes_
  std::unique_ptr<TlsContext> tls_;
};

}  // namespace herd::http
