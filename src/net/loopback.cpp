#include "net/loopback.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "util/error.h"

namespace herd::net {

namespace {
using Clock = std::chrono::steady_clock;
}

struct LoopbackConnection::Shared {
  struct Side {
    std::string peer_name;  // the name of the endpoint at the other end
    std::deque<Frame> inbox;
    FrameLimits limits = FrameLimits::handshake();
    std::optional<std::string> failure;
    bool frozen = false;
    Clock::time_point last_heard = Clock::now();
    ConnectionStats stats;
  };
  std::mutex mutex;
  std::condition_variable changed;
  Side sides[2];
};

LoopbackPair make_loopback_pair(const std::string& name_a, const std::string& name_b) {
  auto shared = std::make_shared<LoopbackConnection::Shared>();
  return LoopbackPair{std::make_shared<LoopbackConnection>(shared, 0, name_b),
                      std::make_shared<LoopbackConnection>(shared, 1, name_a)};
}

LoopbackConnection::LoopbackConnection(std::shared_ptr<Shared> shared, int side,
                                       std::string peer_name)
    : shared_(std::move(shared)), side_(side) {
  shared_->sides[side_].peer_name = std::move(peer_name);
}

LoopbackConnection::~LoopbackConnection() {
  close();
}

void LoopbackConnection::send_frame_parts(const FrameHeader& header,
                                          std::span<const ConstBytes> parts) {
  Frame frame;
  frame.header = header;
  frame.header.length = 0;
  for (ConstBytes part : parts) frame.header.length += part.size();
  frame.storage = allocate_payload(frame.header.length);
  size_t at = 0;
  for (ConstBytes part : parts) {
    if (!part.empty()) std::memcpy(frame.storage.get() + at, part.data(), part.size());
    at += part.size();
  }

  std::lock_guard lock(shared_->mutex);
  Shared::Side& self = shared_->sides[side_];
  Shared::Side& peer = shared_->sides[1 - side_];
  if (self.failure) throw Error("net", "peer '" + self.peer_name + "': " + *self.failure);
  self.stats.frames_sent += 1;
  self.stats.bytes_sent += kFrameHeaderSize + frame.header.length;
  if (peer.failure || peer.frozen) return;  // lost, as on a socket nobody reads
  // What a TCP receiver checks before allocating: the header against its limits.
  std::array<uint8_t, kFrameHeaderSize> head = encode_header(frame.header);
  try {
    decode_header(head, peer.limits);
  } catch (const Error& e) {
    peer.failure = std::string("sent a malformed frame: ") + e.what();
    self.failure = "closed the connection";
    shared_->changed.notify_all();
    return;
  }
  peer.stats.frames_received += 1;
  peer.stats.bytes_received += kFrameHeaderSize + frame.header.length;
  peer.last_heard = Clock::now();
  if (frame.header.type == MessageType::PING) {
    // The peer "reader" answers at once with a PONG carrying the same timestamp.
    self.last_heard = Clock::now();
    return;
  }
  if (frame.header.type == MessageType::PONG) return;
  if (frame.header.type == MessageType::BYE) {
    peer.failure = "said goodbye (BYE)";
  } else {
    peer.inbox.push_back(std::move(frame));
  }
  shared_->changed.notify_all();
}

bool LoopbackConnection::try_send_frame(const FrameHeader& header, ConstBytes payload) {
  send_frame_parts(header, std::span(&payload, 1));
  return true;
}

std::optional<Frame> LoopbackConnection::try_recv_frame(Millis timeout) {
  std::unique_lock lock(shared_->mutex);
  Shared::Side& self = shared_->sides[side_];
  shared_->changed.wait_for(lock, std::min<Millis>(timeout, std::chrono::hours(24 * 365)),
                            [&] { return !self.inbox.empty() || self.failure.has_value(); });
  if (!self.inbox.empty()) {
    Frame frame = std::move(self.inbox.front());
    self.inbox.pop_front();
    return frame;
  }
  if (self.failure) throw Error("net", "peer '" + self.peer_name + "': " + *self.failure);
  return std::nullopt;
}

void LoopbackConnection::fail(const std::string& reason) {
  std::lock_guard lock(shared_->mutex);
  Shared::Side& self = shared_->sides[side_];
  Shared::Side& peer = shared_->sides[1 - side_];
  if (!self.failure) self.failure = reason;
  if (!peer.failure) peer.failure = "closed the connection";
  shared_->changed.notify_all();
}

void LoopbackConnection::close() {
  fail("connection closed by this node");
}

bool LoopbackConnection::is_open() const {
  std::lock_guard lock(shared_->mutex);
  return !shared_->sides[side_].failure;
}

Millis LoopbackConnection::silent_for() const {
  std::lock_guard lock(shared_->mutex);
  return std::chrono::duration_cast<Millis>(Clock::now() - shared_->sides[side_].last_heard);
}

std::string LoopbackConnection::peer_name() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->sides[side_].peer_name;
}

void LoopbackConnection::finish_handshake(const std::string& name, const FrameLimits& limits) {
  std::lock_guard lock(shared_->mutex);
  Shared::Side& self = shared_->sides[side_];
  self.peer_name = name;
  self.limits = limits;
  self.limits.handshake_only = false;
}

ConnectionStats LoopbackConnection::stats() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->sides[side_].stats;
}

void LoopbackConnection::freeze() {
  std::lock_guard lock(shared_->mutex);
  shared_->sides[side_].frozen = true;
}

}  // namespace herd::net
