// GuardedStream: one connection as cpp-httplib's Server reads and writes it, with the
// limits of HttpLimits enforced as the bytes pass: a request's headers within
// max_header_bytes and header_timeout of its first byte, its body within the body cap and
// body_timeout. A read past a limit fails (-1) and overrun() says which limit it was, so
// the server can answer 431, 408 or 413 and close; nothing past a limit is ever read.
//
// A connection goes through phases, per request:
//   wait_request() -- idle until a request's first byte (keep-alive), then HEADERS
//   begin_body()   -- the headers are in: BODY, until the next wait_request()
//
// The bytes come through a Transport: the socket itself, or TLS over it (tls_transport.h).
// Thread safety: one thread uses a stream (the connection's); other threads only shut its
// socket down (ConnectionTable's eviction), which ends its reads.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <httplib.h>

#include "http/limits.h"

// Linux's flag against SIGPIPE on a send; macOS has none (SO_NOSIGPIPE on the socket, which
// GuardedServer sets, does the same there).
#ifdef MSG_NOSIGNAL
inline constexpr int kSendFlags = MSG_NOSIGNAL;
#else
inline constexpr int kSendFlags = 0;
#endif

namespace herd::http {

// The bytes of a connection. REQUIRES: recv() and send() are called only when poll(2) says
// the socket is ready, or pending() > 0 (TLS has decrypted bytes of its own).
class Transport {
 public:
  virtual ~Transport() = default;
  virtual ssize_t recv(char* data, size_t size) = 0;  // 0: the peer closed
  virtual ssize_t send(const char* data, size_t size) = 0;
  virtual size_t pending() const { return 0; }
};

// The socket as it is (plain HTTP).
class SocketTransport final : public Transport {
 public:
  explicit SocketTransport(int fd) : fd_(fd) {}
  ssize_t recv(char* data, size_t size) override;
  ssize_t send(const char* data, size_t size) override;

 private:
  int fd_;
};

class GuardedStream final : public httplib::Stream {
 public:
  enum class Overrun { kNone, kHeaderBytes, kHeaderTime, kBodyBytes, kBodyTime };
  // Per read and per write: a peer that sends or takes nothing for this long is gone.
  struct IoTimeouts {
    std::chrono::milliseconds read{5000}, write{5000};
  };

  // REQUIRES: `transport` reads and writes `fd`; both outlive the stream.
  GuardedStream(int fd, Transport& transport, const HttpLimits& limits, IoTimeouts timeouts);

  // Waits up to `idle` for a request's first byte, in slices, giving up early when
  // `keep_waiting` says so (the server stops). true: bytes (or the peer's close) are there,
  // and the HEADERS phase has begun.
  bool wait_request(std::chrono::milliseconds idle, const std::function<bool()>& keep_waiting);
  // The request's headers are in: the BODY phase begins.
  void begin_body();

  Overrun overrun() const { return overrun_; }
  // Bytes written since wait_request(): 0 means no response was begun.
  size_t written() const { return written_; }
  // The connection must end after this request (a refusal left its body unread).
  void close_after_request() { close_after_ = true; }
  bool closing() const { return close_after_; }

  // httplib::Stream
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  enum class Phase { kIdle, kHeaders, kBody };
  using Clock = std::chrono::steady_clock;

  // Bytes this phase may still read.
  size_t allowance() const;
  // Refills the buffer (it is empty): false on timeout, error (-1 to return) or close (0).
  ssize_t fill();
  bool wait_ready(short events, std::chrono::milliseconds timeout) const;

  int fd_;
  Transport& transport_;
  const HttpLimits& limits_;
  IoTimeouts timeouts_;
  Phase phase_ = Phase::kIdle;
  Clock::time_point deadline_;
  size_t phase_bytes_ = 0;  // read in this phase
  size_t written_ = 0;
  Overrun overrun_ = Overrun::kNone;
  bool close_after_ = false;
  // Read ahead of httplib's reads (it reads headers a byte at a time).
  static constexpr size_t kBufferSize = 16384;
  std::unique_ptr<char[]> buffer_;
  size_t buffer_begin_ = 0, buffer_end_ = 0;
};

}  // namespace herd::http
