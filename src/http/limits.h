// HttpLimits: what one request and one client may cost a server (serve's and the hub's).
// docs/server.md and docs/network.md ("Limits of the HTTP servers") list them with their
// flags; guarded_server.h says how each is enforced.
#pragma once

#include <chrono>
#include <cstddef>

namespace herd::http {

struct HttpLimits {
  // A request's body as the handler gets it; a chunked body's bytes on the wire (framing
  // included) may exceed it by body_framing_allowance() only. Compressed bodies are refused.
  size_t max_body_bytes = size_t{8} << 20;
  // The request line and headers together: 64 KiB is 8 times what browsers send at most.
  size_t max_header_bytes = size_t{64} << 10;
  // From a request's first byte to the end of its headers: a client that trickles them
  // (a header line every few seconds) loses its connection when this passes.
  std::chrono::milliseconds header_timeout{10000};
  // From the end of the headers to the body's last byte (60 s: 8 MiB at 140 KB/s).
  std::chrono::milliseconds body_timeout{60000};
  // Open connections (each has its thread while it is open), and from one client address.
  int max_connections = 256;
  int max_connections_per_address = 32;

  // What chunk framing ("<hex size>\r\n" and "\r\n" around each chunk, the last chunk and
  // trailers) may add on the wire: 1/64 of the body and 4 KiB (64 KiB chunks need 1/8192).
  size_t body_framing_allowance() const { return max_body_bytes / 64 + 4096; }
};

}  // namespace herd::http
