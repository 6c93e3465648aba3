// TCP connections and listener (standalone Asio). A connection reads in two modes:
//   - before finish_handshake(): on the caller's thread, frames limited to HELLO/ERROR/BYE
//     of `control` size, each read bounded by the caller's timeout;
//   - after: a reader thread reads frames as they arrive into a queue (bounded by
//     max_queued_bytes: the reader pauses, and the kernel's flow control slows the sender,
//     when the application falls behind), answers PING with PONG even while the
//     application is busy computing, and records progress for silence detection.
// Every header is validated (decode_header) before its payload is allocated. A peer that
// sends a malformed frame is sent ERROR and dropped; the failure names the peer.
// Sends gather the 28-byte header and the payload parts into one write (no joining copy),
// with TCP_NODELAY on. Once the handshake started encryption (start_encryption), a send
// joins the parts into a reused buffer and seals it there (AEAD wants one message), and
// the reader opens each payload in its receive buffer (frame_cipher.h); WEIGHTS data for a
// sink is then opened in memory and written with pwrite (splice would bypass the check).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "net/transport.h"

namespace asio {
class io_context;
}

namespace herd::net {

struct TcpOptions {
  FrameLimits limits;  // in force after the handshake
  // The reader stops reading while this many payload bytes wait unread (at least one frame
  // is always accepted, so a single large frame never deadlocks).
  uint64_t max_queued_bytes = uint64_t{256} << 20;
  // Large payload buffers kept for reuse once the application drops their frames.
  size_t max_cached_payload_bytes = size_t{160} << 20;
  // SO_SNDBUF / SO_RCVBUF; 0 keeps the kernel's autotuning (usually the faster choice:
  // a fixed size disables Linux's receive-buffer autotuning).
  int socket_buffer_bytes = 0;
  // With a WeightsSink installed, WEIGHTS data goes from the socket into its file by
  // splice(2) on Linux (one copy, none through user memory). false, and on other systems,
  // it goes through a 1 MiB buffer and pwrite (tests set it to check that path on Linux).
  bool splice_weights = true;
};

// "host:port" or "[v6]:port" -> {host, port}. Throws herd::Error on anything else.
std::pair<std::string, uint16_t> parse_address(std::string_view address);

class TcpConnection final : public Connection {
 public:
  struct Impl;  // the Asio socket and io_context, kept out of this header

  // Opens a TCP connection to host:port, resolution and connection within `timeout`.
  // Throws herd::Error "[net] connect to host:port: <reason>".
  static std::shared_ptr<TcpConnection> connect(const std::string& host, uint16_t port,
                                                const TcpOptions& options, Millis timeout);

  // Takes ownership of an accepted socket (used by TcpListener).
  TcpConnection(std::unique_ptr<Impl> impl, std::string address, const TcpOptions& options);
  ~TcpConnection() override;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

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
  // WEIGHTS chunks the sink places go straight into its file (splice on Linux, read and
  // pwrite elsewhere: TcpOptions::splice_weights).
  void set_weights_sink(std::shared_ptr<WeightsSink> sink) override;
  void start_encryption(const SessionKeys& keys) override;
  bool encrypted() const override { return encrypted_.load(); }

  const std::string& address() const { return address_; }
  // Round-trip time of the last PING this side sent that was answered; 0 before any.
  std::chrono::microseconds last_rtt() const;

 private:
  // REQUIRES: send_mutex_ held.
  void write_frame_locked(const FrameHeader& header, std::span<const ConstBytes> parts);
  std::optional<Frame> recv_direct(Millis timeout);
  void reader_loop();
  // Reads exactly `size` bytes on the reader thread; false when the connection ended.
  bool read_fully(uint8_t* data, size_t size);
  // Reads frame.header.length payload bytes (and the tag when sealed) into storage, of
  // which `prefix` were read already, and opens them; false when the connection ended.
  // `header`: the frame's 28 bytes as received.
  bool read_payload(Frame& frame, ConstBytes header, ConstBytes prefix);
  // Opens a sealed payload in place (data[0, length) then the tag); false, failing the
  // connection, when it does not authenticate as the next frame. `header`: its 28 bytes.
  bool open_payload(ConstBytes header, uint8_t* data, uint64_t length);
  // A WEIGHTS frame while a sink is installed: see tcp.cpp.
  bool read_weights(Frame& frame, WeightsSink& sink, ConstBytes header);
  bool read_sealed_weights(Frame& frame, WeightsSink& sink, ConstBytes header);
  // Writes data[0, n) at offset of fd; false (recorded) when the file takes no bytes.
  bool pwrite_all(int fd, const uint8_t* data, size_t n, uint64_t offset);
  // n bytes from the socket into fd at offset; false when the connection or the file
  // failed (recorded). splice_to_file exists on Linux only.
  bool move_to_file(int fd, uint64_t offset, uint64_t n);
  bool splice_to_file(int fd, uint64_t offset, uint64_t n);
  bool write_to_file(int fd, uint64_t offset, uint64_t n);
  bool wait_readable(int socket);
  void answer_ping(uint64_t timestamp_ns);
  void mark_progress();
  // Records the first failure and wakes everyone; REQUIRES: mutex_ held.
  void fail_locked(const std::string& reason);
  std::string peer_name_locked() const;
  [[noreturn]] void throw_failure_locked() const;

  std::unique_ptr<Impl> impl_;
  const std::string address_;
  const TcpOptions options_;
  const std::shared_ptr<PayloadPool> pool_;  // recycles large payload buffers

  mutable std::mutex mutex_;  // guards the fields down to weights_sink_
  std::condition_variable changed_;
  std::string name_;  // from the HELLO; empty before
  FrameLimits limits_ = FrameLimits::handshake();
  std::deque<Frame> queue_;
  uint64_t queued_bytes_ = 0;
  std::optional<std::string> failure_;
  bool closed_ = false;
  bool socket_closed_ = false;
  bool reader_paused_ = false;
  bool reader_started_ = false;
  std::shared_ptr<WeightsSink> weights_sink_;

  int splice_pipe_[2] = {-1, -1};     // the reader's pipe for splice_to_file, made on first use
  std::vector<uint8_t> file_buffer_;  // the reader's buffer for write_to_file, made on first use

  // Set by start_encryption before the reader starts; the reader alone uses opener_.
  std::unique_ptr<FrameCipher> opener_;
  std::atomic<bool> encrypted_{false};

  std::mutex send_mutex_;  // one frame on the wire at a time; guards sealer_, seal_buffer_
  std::unique_ptr<FrameCipher> sealer_;
  std::vector<uint8_t> seal_buffer_;  // a sealed frame's payload, reused
  std::atomic<bool> sending_{false};
  std::atomic<bool> pong_owed_{false};
  std::atomic<uint64_t> pong_owed_timestamp_{0};
  std::atomic<int64_t> last_progress_ns_{0};  // bytes last arrived or a large send advanced
  std::atomic<int64_t> send_started_ns_{0};
  std::atomic<int64_t> last_rtt_us_{0};
  std::atomic<uint64_t> frames_sent_{0}, frames_received_{0}, bytes_sent_{0}, bytes_received_{0};
  std::thread reader_;
};

struct ListenOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: a free port (see TcpListener::port)
  // A non-loopback address is refused unless the node has a cluster key or this is set:
  // without a key, anyone who reaches the port could drive the node.
  bool insecure_listen = false;
  bool has_key = false;
};

class TcpListener {
 public:
  struct Impl;
  // Binds and listens. Throws herd::Error explaining a refused non-loopback bind, an
  // unresolvable host or a port in use.
  static std::unique_ptr<TcpListener> bind(const ListenOptions& listen, const TcpOptions& options);
  ~TcpListener();

  uint16_t port() const;
  std::string address() const;  // "host:port" as bound
  // The next incoming connection (not yet handshaken), or nullptr after `timeout`.
  // REQUIRES: one thread at a time.
  std::shared_ptr<TcpConnection> accept(Millis timeout);

 private:
  explicit TcpListener(std::unique_ptr<Impl> impl, const TcpOptions& options);
  std::unique_ptr<Impl> impl_;
  TcpOptions options_;
};

}  // namespace herd::net
