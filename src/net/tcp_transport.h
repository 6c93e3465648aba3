// The TCP Transport: connects to peers and accepts them, running the HELLO handshake
// (auth.h) on every connection, so what it returns is a peer that proved the cluster key
// (or, in insecure mode, at least speaks the protocol).
//
// Accepting runs in the background: one thread accepts, and each new connection gets its
// own handshake thread (at most max_pending_handshakes at once; beyond that new
// connections are dropped at once), so a peer that connects and says nothing costs one
// handshake timeout on one thread and never delays other peers. A peer that fails the
// handshake is dropped with a logged reason; the listener keeps accepting.
#pragma once

#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "net/auth.h"
#include "net/tcp.h"

namespace herd::net {

struct TcpTransportOptions {
  // auth.node_name empty: listen() names this end "<host name>:<port>" once it has bound
  // (so a node on port 0 is named by the port it got).
  AuthConfig auth;
  TcpOptions tcp;
  Millis handshake_timeout{5000};
  size_t max_pending_handshakes = 16;
  size_t max_waiting_peers = 64;  // authenticated peers not yet taken by accept()
  LogFn log;                      // dropped peers and why; may be empty
  // Test only (--test-link-delay-us): every frame this end sends is late by this much
  // (net/delayed_connection.h).
  std::chrono::microseconds test_send_delay{0};
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TcpTransportOptions options);
  ~TcpTransport() override;  // stops accepting, joins every thread
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // Binds (refusing a non-loopback address without a key unless insecure_listen; has_key
  // is taken from the AuthConfig) and starts accepting in the background. Throws
  // herd::Error. REQUIRES: called at most once.
  void listen(ListenOptions listen);
  uint16_t port() const;  // REQUIRES: listen() succeeded
  // The name this end gives peers in its HELLO.
  const std::string& node_name() const { return options_.auth.node_name; }

  std::string_view name() const override { return "tcp"; }
  std::shared_ptr<Connection> connect(const std::string& address, Millis timeout) override;
  std::shared_ptr<Connection> accept(Millis timeout) override;

 private:
  void accept_loop();
  void handshake(std::shared_ptr<TcpConnection> connection);
  void log(const std::string& line) const;

  TcpTransportOptions options_;
  std::unique_ptr<TcpListener> listener_;
  std::thread acceptor_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<Connection>> ready_;
  struct Handshake {
    std::thread thread;
    std::weak_ptr<TcpConnection> connection;
    bool done = false;
  };
  std::list<Handshake> handshakes_;
};

}  // namespace herd::net
