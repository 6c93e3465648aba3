#include "net/tcp_transport.h"

#include <unistd.h>

#include "net/delayed_connection.h"
#include "util/error.h"

namespace herd::net {

TcpTransport::TcpTransport(TcpTransportOptions options)
    : options_(std::move(options)), slots_(options_.slots) {}

TcpTransport::~TcpTransport() {
  std::list<Handshake> handshakes;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    // Wake handshakes blocked on silent peers rather than wait out their timeouts.
    for (Handshake& h : handshakes_) {
      if (auto connection = h.connection.lock()) connection->fail("node shutting down");
    }
  }
  changed_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard lock(mutex_);
    handshakes.splice(handshakes.end(), handshakes_);
  }
  for (Handshake& h : handshakes) h.thread.join();
  // Connections still in ready_ close when the deque is destroyed.
}

void TcpTransport::log(const std::string& line) const noexcept {
  try {
    if (options_.log) options_.log(line);
  } catch (...) {
    // A log that cannot write must not end a handshake thread.
  }
}

void TcpTransport::listen(ListenOptions listen) {
  HERD_CHECK(!listener_);
  listen.has_key = options_.auth.key != nullptr;
  listener_ = TcpListener::bind(listen, options_.tcp);
  if (options_.auth.node_name.empty()) {
    char host[256] = {};
    const bool named = gethostname(host, sizeof host - 1) == 0 && host[0] != '\0';
    options_.auth.node_name = std::string(named ? host : "node") + ":" + std::to_string(port());
  }
  acceptor_ = std::thread(&TcpTransport::accept_loop, this);
}

uint16_t TcpTransport::port() const {
  HERD_CHECK(listener_);
  return listener_->port();
}

void TcpTransport::accept_loop() {
  // Short accept timeouts so that the destructor is noticed promptly.
  constexpr Millis kPoll(100);
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      // Reap finished handshake threads.
      for (auto it = handshakes_.begin(); it != handshakes_.end();) {
        if (it->done) {
          it->thread.join();
          it = handshakes_.erase(it);
        } else {
          ++it;
        }
      }
    }
    std::shared_ptr<TcpConnection> connection;
    try {
      connection = listener_->accept(kPoll);
      if (!connection) continue;
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      admit_locked(std::move(connection));
    } catch (const std::exception& e) {
      // E.g. out of file descriptors or threads: log, back off, keep serving the peers we
      // have.
      log(std::string("accept failed: ") + e.what());
      std::this_thread::sleep_for(kPoll);
    }
  }
}

void TcpTransport::admit_locked(std::shared_ptr<TcpConnection> connection) {
  if (handshakes_.size() >= 2 * options_.slots.total) {
    log("dropped " + connection->address() + ": " + std::to_string(handshakes_.size()) +
        " handshake threads still running");
    return;  // the connection closes as it goes out of scope
  }
  const HandshakeSlots::Admission admission = slots_.admit(slot_address(connection->address()));
  if (admission.evicted) {
    for (Handshake& h : handshakes_) {
      if (h.slot != *admission.evicted) continue;
      if (auto victim = h.connection.lock()) {
        log("evicted " + victim->address() + ": still in its handshake when " +
            connection->address() + " arrived and the handshake slots were full");
        victim->fail("evicted from its handshake slot by a newer connection");
      }
    }
  }
  Handshake& h = handshakes_.emplace_back();
  h.connection = connection;
  h.slot = admission.id;
  try {
    h.thread = std::thread(&TcpTransport::handshake, this, std::move(connection), admission.id);
  } catch (...) {
    slots_.release(admission.id);
    handshakes_.pop_back();
    throw;
  }
}

void TcpTransport::handshake(std::shared_ptr<TcpConnection> connection,
                             HandshakeSlots::Id slot) noexcept {
  const std::string address = connection->address();
  try {
    run_handshake(std::move(connection), slot);
  } catch (const std::exception& e) {
    log("dropped " + address + ": " + e.what());
  } catch (...) {
    log("dropped " + address + ": unknown error");
  }
  std::lock_guard lock(mutex_);
  slots_.release(slot);
  for (Handshake& h : handshakes_) {
    if (h.slot == slot) h.done = true;
  }
}

void TcpTransport::run_handshake(std::shared_ptr<TcpConnection> connection,
                                 HandshakeSlots::Id slot) {
  PeerIdentity peer = handshake_accept(*connection, options_.auth, options_.handshake_timeout, [&] {
    std::lock_guard lock(mutex_);
    slots_.heard_hello(slot);
  });
  connection->finish_handshake(peer.name, options_.tcp.limits);
  std::lock_guard lock(mutex_);
  if (!slots_.holds(slot)) {
    // Evicted as it finished: its connection has been failed, so it is no peer to hand out.
    log("dropped '" + connection->peer_name() + "': evicted from its handshake slot");
    return;
  }
  slots_.release(slot);  // no longer half-open: the slot is free for the next newcomer
  // The verified id, so that an operator can find what to put in an allow-list.
  log("accepted '" + connection->peer_name() + "': node id " + peer.id.to_text() +
      (peer.encrypted ? "" : ", plaintext frames (--insecure)"));
  if (ready_.size() >= options_.max_waiting_peers) {
    log("dropped peer '" + connection->peer_name() + "': " + std::to_string(ready_.size()) +
        " accepted peers are waiting already");
  } else if (!stopping_) {
    ready_.push_back(connection);
    changed_.notify_all();
  }
}

std::shared_ptr<Connection> TcpTransport::accept(Millis timeout) {
  HERD_CHECK(listener_);
  std::unique_lock lock(mutex_);
  Millis bounded = std::min<Millis>(timeout, std::chrono::hours(24 * 365));  // no overflow
  changed_.wait_for(lock, bounded, [&] { return !ready_.empty() || stopping_; });
  if (ready_.empty()) return nullptr;
  std::shared_ptr<Connection> connection = std::move(ready_.front());
  ready_.pop_front();
  return delayed(std::move(connection), options_.test_send_delay);
}

std::shared_ptr<Connection> TcpTransport::connect(const std::string& address, Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto [host, port] = parse_address(address);
  std::shared_ptr<TcpConnection> connection =
      TcpConnection::connect(host, port, options_.tcp, timeout);
  auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
  PeerIdentity peer = handshake_connect(*connection, options_.auth, std::max(left, Millis(1)));
  connection->finish_handshake(peer.name, options_.tcp.limits);
  return delayed(std::move(connection), options_.test_send_delay);
}

}  // namespace herd::net
