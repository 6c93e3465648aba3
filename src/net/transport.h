// The transport interfaces: a Connection carries frames to and from one peer; a Transport
// opens authenticated connections; Collectives combine data across the ranks of a stage.
// TCP (tcp.h, tcp_transport.h) implements them first; an MPI backend fits beside it (its
// "connections" are ranks of a communicator) and in-process pairs serve tests
// (loopback.h).
//
// Thread-safety of a Connection: send_frame_parts/try_send_frame may be called from any
// thread (sends are serialised); recv_frame/try_recv_frame from one thread at a time;
// fail/close/silent_for/stats from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "net/frame.h"
#include "net/frame_cipher.h"
#include "net/messages.h"

namespace herd::net {

using Millis = std::chrono::milliseconds;

// Where library code reports what it dropped and why (a node's log); never stdout.
using LogFn = std::function<void(std::string_view line)>;

struct ConnectionStats {
  uint64_t frames_sent = 0;
  uint64_t frames_received = 0;
  uint64_t bytes_sent = 0;      // headers included
  uint64_t bytes_received = 0;  // headers included
};

// Where a transport may put the data of WEIGHTS chunks as they arrive: straight into a
// file, never held by the frame (TCP with plaintext frames on Linux splices the socket's
// bytes into the file's page cache: one copy instead of two; elsewhere it reads them
// through a 1 MiB buffer and writes them at their place; sealed frames are opened in a
// pooled buffer first and then written, since unchecked bytes must not reach the file). Receiving
// weights installs one; a transport that cannot do this ignores it and delivers every chunk in
// memory as usual. A frame whose data went to the file has Frame::placed_bytes set and carries the
// fields alone.
class WeightsSink {
 public:
  struct Place {
    int fd = -1;
    uint64_t offset = 0;  // in the file, of the chunk's first byte
  };
  virtual ~WeightsSink() = default;
  // Where the data of this chunk goes, or nullopt to deliver it in memory (a chunk the
  // receiver does not expect there; the receiver then sees it and reports it). Called on
  // the transport's reader thread, which then calls placed() once the data is written or
  // the connection broke off.
  virtual std::optional<Place> place(const WeightsHead& chunk) = 0;
  virtual void placed() = 0;
};

class Connection {
 public:
  virtual ~Connection() = default;

  // Sends one frame whose payload is the concatenation of `parts` (gather: a header of
  // fields and a large tail go out without being joined). header.length is ignored and
  // set from the parts. Throws herd::Error naming the peer if the connection has failed.
  virtual void send_frame_parts(const FrameHeader& header, std::span<const ConstBytes> parts) = 0;
  // As send_frame_parts, but returns false at once, sending nothing, when another send is
  // in progress (heartbeats must never wait behind a large transfer).
  virtual bool try_send_frame(const FrameHeader& header, ConstBytes payload) = 0;

  // The next frame, or nullopt when none arrives within `timeout`. PING and PONG are
  // answered and consumed by the transport, never returned. Throws herd::Error naming the
  // peer when the connection failed (peer closed, malformed frame, heartbeat timeout);
  // frames that arrived before the failure are returned first.
  virtual std::optional<Frame> try_recv_frame(Millis timeout) = 0;

  // Ends the connection: fails pending and later calls with `reason` (the heartbeat calls
  // this for a silent peer; the message names the peer). Safe from any thread.
  virtual void fail(const std::string& reason) = 0;
  // Says BYE (best effort) and releases the connection. Idempotent.
  virtual void close() = 0;

  // Seals every frame sent from now on with keys.send and opens every frame received from
  // now on with keys.receive (frame_cipher.h); a frame that fails to open ends the
  // connection. The handshake calls it at the point both ends switch (auth.h).
  // REQUIRES: before finish_handshake. A connection without a wire (in-process pairs)
  // has nothing to protect and ignores it.
  virtual void start_encryption(const SessionKeys& keys) { (void)keys; }
  // Whether frames are sealed (start_encryption took effect).
  virtual bool encrypted() const { return false; }

  // Installs (nullptr: removes) the sink for the data of WEIGHTS chunks that arrive from
  // now on. The default keeps delivering every chunk in memory.
  virtual void set_weights_sink(std::shared_ptr<WeightsSink> sink) { (void)sink; }
  virtual bool is_open() const = 0;

  // How long the peer has made no progress (no bytes in, none of ours accepted); zero while
  // there is nothing to wait for (the reader is paused because frames wait unread).
  virtual Millis silent_for() const = 0;

  // "name (host:port)" once the handshake named the peer, "host:port" before.
  virtual std::string peer_name() const = 0;
  // Called when the HELLO handshake succeeded: names the peer and lifts the frame limits
  // from handshake-only to `limits`.
  virtual void finish_handshake(const std::string& name, const FrameLimits& limits) = 0;

  virtual ConnectionStats stats() const = 0;

  // ---- conveniences over the virtual interface ----
  void send_frame(MessageType type, uint64_t id, ConstBytes payload);
  // The next frame; throws herd::Error "[net] peer 'x': no frame within N ms" on timeout.
  Frame recv_frame(Millis timeout);
};

template <typename M>
void send_message(Connection& connection, uint64_t id, const M& message) {
  Payload payload = encode(message);
  // The trailer only when there is one: the bulk data stays the last part otherwise.
  ConstBytes parts[3] = {payload.head, payload.tail, payload.trailer};
  connection.send_frame_parts(FrameHeader{M::kType, 0, id, payload.size()},
                              std::span<const ConstBytes>(parts, payload.trailer.empty() ? 2 : 3));
}

// Decodes `frame` as an M. An ERROR frame becomes herd::Error "[net] peer 'x' reported
// <code>: <message>"; any other type is a protocol error naming both types.
template <typename M>
M expect_message(const Frame& frame, std::string_view peer);
[[noreturn]] void throw_unexpected(const Frame& frame, MessageType expected, std::string_view peer);

// Receives and decodes the next frame as an M (see expect_message).
template <typename M>
M recv_message(Connection& connection, Millis timeout, Frame& frame_out) {
  frame_out = connection.recv_frame(timeout);
  return expect_message<M>(frame_out, connection.peer_name());
}

// Opens connections. connect/accept return connections that completed the HELLO
// handshake (see auth.h), so every peer they return is authenticated as configured.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;  // "tcp", later "mpi"
  // address: "host:port" for TCP. Throws herd::Error naming the address on failure.
  virtual std::shared_ptr<Connection> connect(const std::string& address, Millis timeout) = 0;
  // The next authenticated incoming peer, or nullptr when none arrives within `timeout`.
  // Peers that fail the handshake are dropped and logged, never returned.
  virtual std::shared_ptr<Connection> accept(Millis timeout) = 0;
};

// The collectives a tensor-parallel stage uses; every rank of the group calls the same
// operation with the same n, in the same order.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[0, n) becomes the element-wise sum over all ranks' data.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
};

// ---- template definitions ----

template <typename M>
M expect_message(const Frame& frame, std::string_view peer) {
  if (frame.header.type != M::kType) throw_unexpected(frame, M::kType, peer);
  return decode_as<M>(frame.payload());
}

}  // namespace herd::net
