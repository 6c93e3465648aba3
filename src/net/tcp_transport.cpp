#include "net/tcp_transport.h"

#include <unistd.h>

#include "net/delayed_connection.h"
#include "util/error.h"

namespace herd::net {

TcpTransport::TcpTransport(TcpTransportOptions options) : options_(std::move(options)) {}

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

void TcpTransport::log(const std::string& line) const {
  if (options_.log) options_.log(line);
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
    } catch (const Error& e) {
      // E.g. out of file descriptors: log, back off, keep serving the peers we have.
      log(std::string("accept failed: ") + e.what());
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    if (!connection) continue;
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (handshakes_.size() >= options_.max_pending_handshakes) {
      log("dropped " + connection->address() + ": " + std::to_string(handshakes_.size()) +
          " handshakes already in progress");
      continue;  // the connection closes as it goes out of scope
    }
    Handshake& h = handshakes_.emplace_back();
    h.connection = connection;
    h.thread = std::thread(&TcpTransport::handshake, this, std::move(connection));
  }
}

void TcpTransport::handshake(std::shared_ptr<TcpConnection> connection) {
  try {
    PeerIdentity peer = handshake_accept(*connection, options_.auth, options_.handshake_timeout);
    connection->finish_handshake(peer.name, options_.tcp.limits);
    std::lock_guard lock(mutex_);
    if (ready_.size() >= options_.max_waiting_peers) {
      log("dropped peer '" + connection->peer_name() + "': " + std::to_string(ready_.size()) +
          " accepted peers are waiting already");
    } else if (!stopping_) {
      ready_.push_back(connection);
      changed_.notify_all();
    }
  } catch (const std::exception& e) {
    log(std::string("dropped ") + connection->address() + ": " + e.what());
  }
  connection.reset();  // closes it unless it went to ready_
  std::lock_guard lock(mutex_);
  for (Handshake& h : handshakes_) {
    if (h.thread.get_id() == std::this_thread::get_id()) h.done = true;
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
