// Heartbeats: detect a peer that stopped answering (crashed machine, pulled cable,
// stopped process) within a bounded time, so that a coordinator reports an error naming
// the node instead of waiting forever.
//
// One thread watches any number of connections. Every `interval` it sends each a PING
// (skipped while a send is in progress: the heartbeat never waits behind a large
// transfer), and when a connection has made no progress for longer than `timeout`
// (Connection::silent_for: no bytes in, none of ours accepted) it fails the connection
// with "silent for N ms", which wakes any thread blocked in recv or send on it with a
// herd::Error naming the peer, and reports the peer to `on_silent`.
// The TCP reader answers PING with PONG on its own thread, so a peer that is busy
// computing still answers; only a peer whose process or network is gone falls silent.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/transport.h"

namespace herd::net {

struct HeartbeatOptions {
  Millis interval{250};
  // Detection takes at most timeout + interval: 1.75 s by default, inside the 2 s a
  // coordinator has to notice a lost node. (The TCP reader answers PINGs on its own
  // thread, so a node busy computing is never silent this long.)
  Millis timeout{1500};
};

class Heartbeat {
 public:
  // on_silent(peer_name, reason) is called on the heartbeat thread; it may be empty.
  using SilentFn = std::function<void(const std::string& peer, const std::string& reason)>;

  explicit Heartbeat(HeartbeatOptions options, SilentFn on_silent = {});
  ~Heartbeat();  // stops the thread; watched connections are left as they are
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Watches until the connection closes, fails or is destroyed (holds a weak reference).
  // Silence counts from now at the earliest: a link made before a long load (no PINGs
  // then) is not failed at once for the silence before it was watched.
  void watch(const std::shared_ptr<Connection>& connection);
  size_t watched() const;

 private:
  void run();
  void tick();

  const HeartbeatOptions options_;
  const SilentFn on_silent_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  struct Watched {
    std::weak_ptr<Connection> connection;
    std::chrono::steady_clock::time_point since;  // when watch() was called
  };
  std::vector<Watched> connections_;
  std::thread thread_;
};

}  // namespace herd::net
