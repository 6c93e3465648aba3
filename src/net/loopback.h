// In-process connections for tests: make_loopback_pair() returns two connected endpoints;
// a frame sent on one is received on the other, checked against the receiver's frame
// limits like a TCP frame. A PING is answered at once by the other endpoint (as the TCP
// reader thread does) unless that endpoint is frozen, which simulates a stopped process.
// Thread-safe as the Connection interface requires.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "net/transport.h"

namespace herd::net {

class LoopbackConnection;

struct LoopbackPair {
  std::shared_ptr<LoopbackConnection> a;
  std::shared_ptr<LoopbackConnection> b;
};

// `a` reports peer name name_b and vice versa. Both start with handshake-only limits,
// like TCP connections; finish_handshake lifts them.
LoopbackPair make_loopback_pair(const std::string& name_a, const std::string& name_b);

class LoopbackConnection final : public Connection {
 public:
  struct Shared;  // the two directions' queues, shared by both endpoints
  LoopbackConnection(std::shared_ptr<Shared> shared, int side, std::string peer_name);
  ~LoopbackConnection() override;

  void send_frame_parts(const FrameHeader& header, std::span<const ConstBytes> parts) override;
  bool try_send_frame(const FrameHeader& header, ConstBytes payload) override;
  std::optional<Frame> try_recv_frame(Millis timeout) override;
  void fail(const std::string& reason) override;
  void close() override;
  bool is_open() const override;
  Millis silent_for() const override;
  std::string peer_name() const override;
  void finish_handshake(const std::string& name, const FrameLimits& limits) override;
  ConnectionStats stats() const override;

  // A frozen endpoint neither answers PINGs nor delivers frames to its peer: to the peer
  // it looks like a stopped process whose socket is still open.
  void freeze();

 private:
  std::shared_ptr<Shared> shared_;
  const int side_;  // 0 or 1: index of this endpoint's inbox in Shared
};

}  // namespace herd::net
