// Shared by the HTTP request-path fuzz targets (http_hub_fuzz, http_serve_fuzz): the input's
// bytes as one client connection to a GuardedServer, byte for byte as a socket would carry
// them (one end of a socketpair: written whole, closed for writing, the answers drained), so
// the whole request path runs: GuardedStream's limits, the pre-routing screen, httplib's
// parsing of request lines, headers and chunking, keep-alive, the handlers.
//
// Limits small enough that inputs reach them (fuzz-smoke's -max_len is 64 KiB). Every
// handler checks what it was given is within them; the targets run with -malloc_limit_mb,
// so one allocation beyond what the limits allow is a finding too.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <thread>

#include "http/guarded_server.h"

namespace herd::fuzz {

inline http::HttpLimits fuzz_limits() {
  http::HttpLimits l;
  l.max_body_bytes = 16384;
  l.max_header_bytes = 4096;
  l.header_timeout = std::chrono::milliseconds(2000);
  l.body_timeout = std::chrono::milliseconds(2000);
  l.max_connections = 4;
  l.max_connections_per_address = 4;
  return l;
}

// What a handler is given never exceeds the limits: the body, and the headers (httplib adds
// four of its own: REMOTE_ADDR, REMOTE_PORT, LOCAL_ADDR, LOCAL_PORT).
inline void check_within_limits(const httplib::Request& req, const http::HttpLimits& limits) {
  if (req.body.size() > limits.max_body_bytes) std::abort();
  size_t header_bytes = req.method.size() + req.target.size();
  for (const auto& [key, value] : req.headers) header_bytes += key.size() + value.size();
  if (header_bytes > limits.max_header_bytes + 256) std::abort();
}

// The whole input is in the socket (and its end) before the server reads: each run is the
// same, however the threads are scheduled. fuzz-smoke's inputs (64 KiB at most) fit the
// socket's buffer; the answers are drained as they come.
inline void serve_bytes(http::GuardedServer& server, std::string_view bytes) {
  int fd[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd) != 0) std::abort();
  const int buffer_size = 1 << 20;
  setsockopt(fd[1], SOL_SOCKET, SO_SNDBUF, &buffer_size, sizeof buffer_size);
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        send(fd[1], bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;  // the buffer is full: the rest is cut off, as a client that stops
    sent += static_cast<size_t>(n);
  }
  shutdown(fd[1], SHUT_WR);
  std::thread reader([&] {
    char buffer[16384];
    while (recv(fd[1], buffer, sizeof buffer, 0) > 0) {
    }
  });
  server.serve_socket(fd[0]);  // closes fd[0]
  reader.join();
  close(fd[1]);
}

}  // namespace herd::fuzz
