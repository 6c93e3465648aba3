#include "net/heartbeat.h"

#include "util/error.h"

namespace herd::net {

Heartbeat::Heartbeat(HeartbeatOptions options, SilentFn on_silent)
    : options_(options), on_silent_(std::move(on_silent)) {
  HERD_CHECK(options_.interval.count() > 0 && options_.timeout > options_.interval);
  thread_ = std::thread(&Heartbeat::run, this);
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Heartbeat::watch(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(mutex_);
  connections_.push_back(Watched{connection, std::chrono::steady_clock::now()});
}

size_t Heartbeat::watched() const {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

void Heartbeat::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.interval, [&] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    tick();
    lock.lock();
  }
}

void Heartbeat::tick() {
  std::vector<std::pair<std::shared_ptr<Connection>, Millis>> live;  // with time watched
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    std::erase_if(connections_, [&](const Watched& w) {
      std::shared_ptr<Connection> connection = w.connection.lock();
      if (!connection || !connection->is_open()) return true;
      live.emplace_back(std::move(connection), std::chrono::duration_cast<Millis>(now - w.since));
      return false;
    });
  }
  uint64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
  Payload ping = encode(Ping{now_ns});
  for (const auto& [connection, watched_for] : live) {
    Millis silent = std::min(connection->silent_for(), watched_for);
    if (silent > options_.timeout) {
      std::string reason = "silent for " + std::to_string(silent.count()) +
                           " ms (heartbeat timeout " + std::to_string(options_.timeout.count()) +
                           " ms); the node may have crashed or lost its network";
      std::string peer = connection->peer_name();
      // Report first, then wake the waiters: whoever sees the failure can rely on the
      // report having been made.
      if (on_silent_) on_silent_(peer, reason);
      connection->fail(reason);
      continue;
    }
    try {
      connection->try_send_frame(FrameHeader{MessageType::PING, 0, 0, 0}, ping.head);
    } catch (const Error&) {
      // The connection failed meanwhile; its users see the failure, and the next tick
      // drops it from the list.
    }
  }
  // The last references may be released here; a TcpConnection closes on this thread then.
}

}  // namespace herd::net
