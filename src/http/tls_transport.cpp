#include "http/tls_transport.h"

#include <fcntl.h>
#include <poll.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "util/error.h"

namespace herd::http {
namespace {

class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(SSL* ssl) : ssl_(ssl) {}
  ~TlsTransport() override {
    SSL_shutdown(ssl_);  // best effort: the close_notify alert, not waiting for the peer's
    SSL_free(ssl_);
  }
  ssize_t recv(char* data, size_t size) override {
    const int n = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    if (n > 0) return n;
    return SSL_get_error(ssl_, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
  }
  ssize_t send(const char* data, size_t size) override {
    const int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    return n > 0 ? n : -1;
  }
  size_t pending() const override { return static_cast<size_t>(SSL_pending(ssl_)); }

 private:
  SSL* ssl_;
};

}  // namespace

struct TlsContext::Impl {
  SSL_CTX* ctx = nullptr;
};

TlsContext::TlsContext(const std::string& cert_file, const std::string& key_file)
    : impl_(std::make_unique<Impl>()) {
  impl_->ctx = SSL_CTX_new(TLS_server_method());
  if (!impl_->ctx) throw Error("http", "TLS: OpenSSL could not make a context");
  SSL_CTX_set_min_proto_version(impl_->ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(impl_->ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(impl_->ctx, cert_file.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(impl_->ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(impl_->ctx) != 1) {
    ERR_clear_error();
    SSL_CTX_free(impl_->ctx);
    throw Error("http", "TLS: cannot serve with certificate '" + cert_file + "' and key '" +
                            key_file + "' (unreadable, not PEM, or not a pair)");
  }
}

TlsContext::~TlsContext() {
  SSL_CTX_free(impl_->ctx);
}

std::unique_ptr<Transport> TlsContext::accept(int fd, std::chrono::milliseconds timeout) const {
  SSL* ssl = SSL_new(impl_->ctx);
  if (!ssl) return nullptr;
  // The handshake without blocking, so its deadline holds however the client trickles it;
  // then blocking again (GuardedStream polls before each read and write).
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  SSL_set_fd(ssl, fd);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool done = false;
  for (;;) {
    const int r = SSL_accept(ssl);
    if (r == 1) {
      done = true;
      break;
    }
    const int e = SSL_get_error(ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
  }
  fcntl(fd, F_SETFL, flags);
  ERR_clear_error();
  if (!done) {
    SSL_free(ssl);
    return nullptr;
  }
  return std::make_unique<TlsTransport>(ssl);
}

}  // namespace herd::http
