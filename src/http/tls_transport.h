// TLS for GuardedServer (the hub's --tls-cert): an OpenSSL context made once from a
// certificate chain and key, and a Transport per connection. Built only with OpenSSL
// (HERD_HTTP_TLS); without it, GuardedServer::use_tls() says so.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "http/guarded_stream.h"

namespace herd::http {

class TlsContext {
 public:
  // Throws herd::Error("[http] ...") when the files are unreadable or not a pair.
  TlsContext(const std::string& cert_file, const std::string& key_file);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // The handshake on `fd`, within `timeout` (a client that trickles it is dropped): a
  // transport, or nullptr when it failed.
  std::unique_ptr<Transport> accept(int fd, std::chrono::milliseconds timeout) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::http
