// A connection whose frames arrive late: a test-only one-way delay on every frame it sends
// (send_frame_parts waits `delay` first), so that tests on this machine see links as slow
// as a LAN's. The kernel's netem qdisc, which would delay packets, is missing from the
// test machines' kernel; tbf (bandwidth) is there. Heartbeats (try_send_frame) and the
// PONGs the TCP reader sends itself are not delayed: a delayed link is never taken for a
// dead one. Everything else is the inner connection's.
#pragma once

#include <chrono>
#include <memory>

#include "net/transport.h"

namespace herd::net {

class DelayedConnection final : public Connection {
 public:
  DelayedConnection(std::shared_ptr<Connection> inner, std::chrono::microseconds delay)
      : inner_(std::move(inner)), delay_(delay) {}

  void send_frame_parts(const FrameHeader& header, std::span<const ConstBytes> parts) override;
  bool try_send_frame(const FrameHeader& header, ConstBytes payload) override {
    return inner_->try_send_frame(header, payload);
  }
  std::optional<Frame> try_recv_frame(Millis timeout) override {
    return inner_->try_recv_frame(timeout);
  }
  void fail(const std::string& reason) override { inner_->fail(reason); }
  void close() override { inner_->close(); }
  void set_weights_sink(std::shared_ptr<WeightsSink> sink) override {
    inner_->set_weights_sink(std::move(sink));
  }
  bool is_open() const override { return inner_->is_open(); }
  Millis silent_for() const override { return inner_->silent_for(); }
  std::string peer_name() const override { return inner_->peer_name(); }
  void finish_handshake(const std::string& name, const FrameLimits& limits) override {
    inner_->finish_handshake(name, limits);
  }
  ConnectionStats stats() const override { return inner_->stats(); }

 private:
  std::shared_ptr<Connection> inner_;
  std::chrono::microseconds delay_;
};

// `connection` itself when `delay` is zero.
std::shared_ptr<Connection> delayed(std::shared_ptr<Connection> connection,
                                    std::chrono::microseconds delay);

}  // namespace herd::net
