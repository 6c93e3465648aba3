// The TCP Transport: connects to peers and accepts them, running the HELLO handshake
// (auth.h) on every connection, so what it returns is a peer that proved the cluster key
// (or, in insecure mode, at least speaks the protocol).
//
// Accepting runs in the background: one thread accepts, and each new connection gets its
// own handshake thread and a handshake slot (handshake_slots.h: at most `slots.total` at
// once, `slots.per_address` from one address; a newcomer evicts the oldest half-open
// handshake rather than be refused), so a peer that connects and says nothing, or says half
// a HELLO, costs one thread until the handshake deadline or its eviction, and never delays
// other peers. A peer that fails the handshake is dropped with a logged reason; the
// listener keeps accepting. Nothing a peer sends can throw out of these threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "net/auth.h"
#include "net/handshake_slots.h"
#include "net/tcp.h"

namespace herd::net {

struct TcpTransportOptions {
  // auth.node_name empty: listen() names this end "<host name>:<port>" once it has bound
  // (so a node on port 0 is named by the port it got).
  AuthConfig auth;
  TcpOptions tcp;
  // The whole HELLO exchange must end within this (a deadline, not an idle timeout: a
  // peer that trickles bytes is cut off as one that sends none).
  Millis handshake_timeout{5000};
  HandshakeSlotLimits slots;
  size_t max_waiting_peers = 64;  // authenticated peers not yet taken by accept()
  LogFn log;                      // accepted peers' ids, dropped peers and why; may be empty
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
  // REQUIRES: mutex_ held. Gives the connection a slot and a handshake thread.
  void admit_locked(std::shared_ptr<TcpConnection> connection);
  void handshake(std::shared_ptr<TcpConnection> connection, HandshakeSlots::Id slot) noexcept;
  void run_handshake(std::shared_ptr<TcpConnection> connection, HandshakeSlots::Id slot);
  void log(const std::string& line) const noexcept;

  TcpTransportOptions options_;
  std::unique_ptr<TcpListener> listener_;
  std::thread acceptor_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  bool stopping_ = false;
  std::deque<std::shared_ptr<Connection>> ready_;
  HandshakeSlots slots_;
  struct Handshake {
    std::thread thread;
    std::weak_ptr<TcpConnection> connection;
    HandshakeSlots::Id slot = 0;
    bool done = false;  // its thread has finished: join it
  };
  // Running handshake threads, evicted ones included until they end (moments: their
  // sockets are shut down); at most 2 x slots.total, so a flood cannot pile up threads.
  std::list<Handshake> handshakes_;
};

}  // namespace herd::net
