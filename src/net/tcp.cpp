#include "net/tcp.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <charconv>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace herd::net {

namespace {

using Clock = std::chrono::steady_clock;

// Bytes per read_some/write_some: large enough that a 64 MiB chunk costs few system calls
// (Asio's default is 64 KiB), small enough that progress is recorded often on slow links.
constexpr size_t kIoChunkBytes = size_t{4} << 20;

// The largest seal buffer a connection keeps between frames: a 16 MiB chunk or a large
// batch's activations reuse it; a larger frame's buffer is freed after it is sent.
constexpr size_t kKeptSealBufferBytes = size_t{16} << 20;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// condition_variable::wait_for overflows on durations near Millis::max().
Millis clamp_timeout(Millis timeout) {
  constexpr Millis kYear = std::chrono::hours(24 * 365);
  if (timeout.count() < 0) return Millis(0);
  return timeout > kYear ? kYear : timeout;
}

std::string join_address(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string endpoint_address(const asio::ip::tcp::endpoint& endpoint) {
  return join_address(endpoint.address().to_string(), endpoint.port());
}

// "[net] frame: bad magic" -> "frame: bad magic": the failure is re-wrapped with the peer.
std::string without_module(const char* what) {
  std::string_view text(what);
  if (text.rfind("[net] ", 0) == 0) text.remove_prefix(6);
  return std::string(text);
}

// Runs `io` until `done` is set by a handler or `deadline` passes; then cancels the
// outstanding operation and runs the context dry, so its handler has run (with
// operation_aborted, or success if it finished first) when this returns.
template <typename Cancel>
void run_until(asio::io_context& io, const bool& done, Clock::time_point deadline, Cancel cancel) {
  io.restart();
  while (!done && Clock::now() < deadline) {
    if (io.run_one_until(deadline) == 0 && io.stopped()) break;
  }
  if (done) return;
  cancel();
  io.restart();
  io.run();
}

std::vector<asio::ip::tcp::endpoint> resolve(asio::io_context& io, const std::string& host,
                                             uint16_t port, const std::string& what) {
  asio::error_code ec;
  asio::ip::address numeric = asio::ip::make_address(host, ec);
  if (!ec) return {asio::ip::tcp::endpoint(numeric, port)};
  // Host names go through the system resolver (bounded by its own timeouts).
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw Error("net", what + ": cannot resolve host '" + host + "': " + ec.message());
  }
  std::vector<asio::ip::tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  return endpoints;
}

void configure_socket(asio::ip::tcp::socket& socket, const TcpOptions& options) {
  asio::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  if (options.socket_buffer_bytes > 0) {
    socket.set_option(asio::socket_base::send_buffer_size(options.socket_buffer_bytes), ignored);
    socket.set_option(asio::socket_base::receive_buffer_size(options.socket_buffer_bytes), ignored);
  }
}

}  // namespace

std::pair<std::string, uint16_t> parse_address(std::string_view address) {
  auto bad = [&](std::string_view why) -> Error {
    return Error("net", "address '" + std::string(address) + "': " + std::string(why) +
                            " (expected host:port or [ipv6]:port)");
  };
  std::string_view host;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find("]:");
    if (close == std::string_view::npos) throw bad("unclosed '['");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) throw bad("no port");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) throw bad("IPv6 addresses need brackets");
  }
  if (host.empty()) throw bad("no host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || port.empty() || value > 65535) {
    throw bad("bad port");
  }
  return {std::string(host), static_cast<uint16_t>(value)};
}

// ---------------------------------------------------------------------------------------
// TcpConnection

struct TcpConnection::Impl {
  asio::io_context io;  // run only by the thread in a direct (pre-handshake) read
  asio::ip::tcp::socket socket{io};
};

std::shared_ptr<TcpConnection> TcpConnection::connect(const std::string& host, uint16_t port,
                                                      const TcpOptions& options, Millis timeout) {
  std::string address = join_address(host, port);
  std::string what = "connect to " + address;
  Clock::time_point deadline = Clock::now() + clamp_timeout(timeout);
  auto impl = std::make_unique<Impl>();
  std::vector<asio::ip::tcp::endpoint> endpoints = resolve(impl->io, host, port, what);

  bool done = false;
  asio::error_code result;
  asio::async_connect(impl->socket, endpoints,
                      [&](const asio::error_code& ec, const asio::ip::tcp::endpoint&) {
                        result = ec;
                        done = true;
                      });
  run_until(impl->io, done, deadline, [&] {
    asio::error_code ignored;
    impl->socket.close(ignored);
  });
  if (result == asio::error::operation_aborted) {
    throw Error("net", what + ": no answer within " + std::to_string(timeout.count()) + " ms");
  }
  if (result) throw Error("net", what + ": " + result.message());
  configure_socket(impl->socket, options);
  return std::make_shared<TcpConnection>(std::move(impl), address, options);
}

TcpConnection::TcpConnection(std::unique_ptr<Impl> impl, std::string address,
                             const TcpOptions& options)
    : impl_(std::move(impl)),
      address_(std::move(address)),
      options_(options),
      pool_(PayloadPool::create(options.max_cached_payload_bytes)) {
  mark_progress();
}

TcpConnection::~TcpConnection() {
  close();
#ifdef __linux__
  for (int fd : splice_pipe_) {
    if (fd >= 0) ::close(fd);
  }
#endif
}

void TcpConnection::mark_progress() {
  last_progress_ns_.store(now_ns(), std::memory_order_relaxed);
}

std::string TcpConnection::peer_name_locked() const {
  return name_.empty() ? address_ : name_ + " (" + address_ + ")";
}

std::string TcpConnection::peer_name() const {
  std::lock_guard lock(mutex_);
  return peer_name_locked();
}

void TcpConnection::throw_failure_locked() const {
  throw Error("net", "peer '" + peer_name_locked() + "': " + *failure_);
}

void TcpConnection::fail_locked(const std::string& reason) {
  if (!failure_) failure_ = reason;
  // shutdown() wakes a reader blocked in recv and a writer blocked in send; the descriptor
  // stays valid until close() (guarded by socket_closed_), so it is never a reused number.
  if (!socket_closed_) ::shutdown(impl_->socket.native_handle(), SHUT_RDWR);
  changed_.notify_all();
}

void TcpConnection::fail(const std::string& reason) {
  std::lock_guard lock(mutex_);
  fail_locked(reason);
}

bool TcpConnection::is_open() const {
  std::lock_guard lock(mutex_);
  return !failure_ && !closed_;
}

Millis TcpConnection::silent_for() const {
  int64_t since = last_progress_ns_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    if (reader_paused_) {
      // Not reading by choice: only a send in progress can show the peer is gone.
      if (!sending_.load()) return Millis(0);
      since = std::max(since, send_started_ns_.load());
    }
  }
  return Millis(std::max<int64_t>(0, (now_ns() - since) / 1000000));
}

std::chrono::microseconds TcpConnection::last_rtt() const {
  return std::chrono::microseconds(last_rtt_us_.load());
}

ConnectionStats TcpConnection::stats() const {
  return ConnectionStats{frames_sent_.load(), frames_received_.load(), bytes_sent_.load(),
                         bytes_received_.load()};
}

void TcpConnection::finish_handshake(const std::string& name, const FrameLimits& limits) {
  std::lock_guard lock(mutex_);
  name_ = name;
  limits_ = limits;
  limits_.handshake_only = false;
  mark_progress();
  if (!reader_started_ && !failure_) {
    reader_started_ = true;
    reader_ = std::thread(&TcpConnection::reader_loop, this);
  }
}

void TcpConnection::start_encryption(const SessionKeys& keys) {
  std::lock_guard send_lock(send_mutex_);
  std::lock_guard lock(mutex_);
  HERD_CHECK(!reader_started_);
  sealer_ = std::make_unique<FrameCipher>(keys.send);
  opener_ = std::make_unique<FrameCipher>(keys.receive);
  encrypted_.store(true);
}

// ---- sending ----

void TcpConnection::write_frame_locked(const FrameHeader& header,
                                       std::span<const ConstBytes> parts) {
  FrameHeader h = header;
  h.length = 0;
  for (ConstBytes part : parts) h.length += part.size();
  std::array<uint8_t, kFrameHeaderSize> head = encode_header(h);
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(parts.size() + 2);
  buffers.emplace_back(head.data(), head.size());
  std::array<uint8_t, kFrameTagBytes> tag;
  if (sealer_) {
    // AEAD seals one contiguous message: join the parts in a reused buffer, seal in place.
    const size_t n = static_cast<size_t>(h.length);
    if (seal_buffer_.size() < n) seal_buffer_.resize(n);
    size_t at = 0;
    for (ConstBytes part : parts) {
      if (!part.empty()) std::memcpy(seal_buffer_.data() + at, part.data(), part.size());
      at += part.size();
    }
    sealer_->seal(head, std::span<uint8_t>(seal_buffer_.data(), n), tag.data());
    if (n > 0) buffers.emplace_back(seal_buffer_.data(), n);
    buffers.emplace_back(tag.data(), tag.size());
  } else {
    for (ConstBytes part : parts) {
      if (!part.empty()) buffers.emplace_back(part.data(), part.size());
    }
  }
  send_started_ns_.store(now_ns());
  sending_.store(true);
  asio::error_code ec;
  asio::write(
      impl_->socket, buffers,
      [this](const asio::error_code& error, size_t transferred) -> size_t {
        // Called before each write_some: with transferred > 0 the kernel took more of a
        // large frame, so the peer is consuming. A small frame that fits the socket buffer
        // proves nothing (a frozen peer's kernel still buffers our PINGs).
        if (transferred > 0) mark_progress();
        return error ? 0 : kIoChunkBytes;
      },
      ec);
  sending_.store(false);
  // Keep a buffer for weight chunks and activations; let a rare huge frame's go.
  if (seal_buffer_.size() > kKeptSealBufferBytes) std::vector<uint8_t>().swap(seal_buffer_);
  if (ec) {
    std::lock_guard lock(mutex_);
    fail_locked("send failed: " + ec.message());
    throw_failure_locked();
  }
  frames_sent_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(kFrameHeaderSize + h.length + (sealer_ ? kFrameTagBytes : 0),
                        std::memory_order_relaxed);
  if (pong_owed_.exchange(false)) {
    Payload pong = encode(Pong{pong_owed_timestamp_.load()});
    ConstBytes part = pong.head;
    write_frame_locked(FrameHeader{MessageType::PONG, 0, 0, 0}, std::span(&part, 1));
  }
}

void TcpConnection::send_frame_parts(const FrameHeader& header, std::span<const ConstBytes> parts) {
  {
    std::lock_guard lock(mutex_);
    if (failure_) throw_failure_locked();
  }
  std::lock_guard send_lock(send_mutex_);
  write_frame_locked(header, parts);
}

bool TcpConnection::try_send_frame(const FrameHeader& header, ConstBytes payload) {
  {
    std::lock_guard lock(mutex_);
    if (failure_) throw_failure_locked();
  }
  std::unique_lock send_lock(send_mutex_, std::try_to_lock);
  if (!send_lock) return false;
  write_frame_locked(header, std::span(&payload, 1));
  return true;
}

void TcpConnection::answer_ping(uint64_t timestamp_ns) {
  // Never wait behind the application's send (it may be blocked on a peer that waits for
  // us): owe the PONG instead, and the current send writes it when it finishes.
  std::unique_lock send_lock(send_mutex_, std::try_to_lock);
  if (!send_lock) {
    pong_owed_timestamp_.store(timestamp_ns);
    pong_owed_.store(true);
    return;
  }
  Payload pong = encode(Pong{timestamp_ns});
  ConstBytes part = pong.head;
  write_frame_locked(FrameHeader{MessageType::PONG, 0, 0, 0}, std::span(&part, 1));
}

// ---- receiving ----

bool TcpConnection::read_fully(uint8_t* data, size_t size) {
  asio::error_code ec;
  asio::read(
      impl_->socket, asio::buffer(data, size),
      [this](const asio::error_code& error, size_t transferred) -> size_t {
        if (transferred > 0) mark_progress();  // bytes arrived; more of the frame to come
        return error ? 0 : kIoChunkBytes;
      },
      ec);
  if (!ec) {
    mark_progress();
    return true;
  }
  std::lock_guard lock(mutex_);
  fail_locked(ec == asio::error::eof ? "closed the connection" : "receive failed: " + ec.message());
  return false;
}

void TcpConnection::reader_loop() {
  try {
    for (;;) {
      FrameLimits limits;
      {
        std::unique_lock lock(mutex_);
        if (queued_bytes_ >= options_.max_queued_bytes && !failure_) {
          reader_paused_ = true;
          mark_progress();
          changed_.wait(lock, [&] {
            return queued_bytes_ < options_.max_queued_bytes || failure_.has_value();
          });
          reader_paused_ = false;
          mark_progress();
        }
        if (failure_) return;
        limits = limits_;
      }
      std::array<uint8_t, kFrameHeaderSize> head;
      if (!read_fully(head.data(), head.size())) return;
      Frame frame;
      try {
        frame.header = decode_header(head, limits);
      } catch (const Error& e) {
        std::string reason = without_module(e.what());
        try {
          Payload reply = encode(ErrorReply{ErrorCode::PROTOCOL, reason});
          try_send_frame(FrameHeader{MessageType::ERROR, 0, 0, 0}, reply.head);
        } catch (const Error&) {
        }
        fail("sent a malformed frame: " + reason);
        return;
      }
      std::shared_ptr<WeightsSink> sink;
      if (frame.header.type == MessageType::WEIGHTS) {
        std::lock_guard lock(mutex_);
        sink = weights_sink_;
      }
      const bool read = sink ? read_weights(frame, *sink, head) : read_payload(frame, head, {});
      if (!read) return;
      frames_received_.fetch_add(1, std::memory_order_relaxed);
      bytes_received_.fetch_add(
          kFrameHeaderSize + frame.header.length + (opener_ ? kFrameTagBytes : 0),
          std::memory_order_relaxed);

      switch (frame.header.type) {
        case MessageType::PING:
          answer_ping(decode_ping(frame.payload()).timestamp_ns);
          continue;
        case MessageType::PONG: {
          uint64_t sent = decode_pong(frame.payload()).timestamp_ns;
          int64_t rtt_ns = now_ns() - static_cast<int64_t>(sent);
          if (rtt_ns >= 0) last_rtt_us_.store(rtt_ns / 1000);
          continue;
        }
        case MessageType::BYE:
          fail("said goodbye (BYE)");
          return;
        default:
          break;
      }
      {
        std::lock_guard lock(mutex_);
        queued_bytes_ += frame.payload().size();
        queue_.push_back(std::move(frame));
      }
      changed_.notify_all();
    }
  } catch (const std::exception& e) {
    fail("receive failed: " + without_module(e.what()));
  }
}

bool TcpConnection::read_payload(Frame& frame, ConstBytes header, ConstBytes prefix) {
  const uint64_t length = frame.header.length;
  const uint64_t wire = length + (opener_ ? kFrameTagBytes : 0);
  frame.storage = pool_->allocate(wire);
  if (!prefix.empty()) std::memcpy(frame.storage.get(), prefix.data(), prefix.size());
  if (!read_fully(frame.storage.get() + prefix.size(), wire - prefix.size())) return false;
  return !opener_ || open_payload(header, frame.storage.get(), length);
}

bool TcpConnection::open_payload(ConstBytes header, uint8_t* data, uint64_t length) {
  const uint64_t number = opener_->frames();
  if (opener_->open(header, std::span<uint8_t>(data, length), data + length)) return true;
  const FrameHeader h = decode_header(header, FrameLimits{});
  fail("frame " + std::to_string(number) + " (" + std::string(message_type_name(h.type)) + ", " +
       std::to_string(length) +
       " bytes) failed authentication: tampered with, replayed, reordered or not sealed by "
       "the peer; connection dropped");
  return false;
}

void TcpConnection::set_weights_sink(std::shared_ptr<WeightsSink> sink) {
  std::lock_guard lock(mutex_);
  weights_sink_ = std::move(sink);
}

// A WEIGHTS frame while a sink is installed: reads the chunk's fields, asks the sink where
// its data goes and moves it there from the socket (move_to_file); the frame keeps the
// fields alone.
// Fields that do not parse, and chunks the sink declines, are read into memory whole, as
// without a sink, for the receiver to see and report.
bool TcpConnection::read_weights(Frame& frame, WeightsSink& sink, ConstBytes header) {
  if (opener_) return read_sealed_weights(frame, sink, header);
  const uint64_t length = frame.header.length;
  std::vector<uint8_t> fields(sizeof(uint32_t));
  if (length < fields.size()) return read_payload(frame, header, {});
  if (!read_fully(fields.data(), fields.size())) return false;
  uint32_t name_bytes;
  std::memcpy(&name_bytes, fields.data(), sizeof name_bytes);
  const uint64_t head_bytes = weights_head_bytes(name_bytes);
  if (name_bytes > kMaxTensorNameBytes || head_bytes > length) {
    return read_payload(frame, header, fields);
  }
  fields.resize(head_bytes);
  if (!read_fully(fields.data() + sizeof name_bytes, head_bytes - sizeof name_bytes)) return false;
  std::optional<WeightsHead> head;
  try {
    head = decode_weights_head(fields);
  } catch (const Error&) {
  }
  if (!head || head->n_bytes != length - head_bytes) return read_payload(frame, header, fields);
  const std::optional<WeightsSink::Place> place = sink.place(*head);
  if (!place) return read_payload(frame, header, fields);
  const bool moved = move_to_file(place->fd, place->offset, head->n_bytes);
  sink.placed();
  if (!moved) return false;
  frame.storage = allocate_payload(fields.size());
  std::memcpy(frame.storage.get(), fields.data(), fields.size());
  frame.placed_bytes = head->n_bytes;
  return true;
}

// A sealed WEIGHTS frame while a sink is installed: the whole payload is read into a
// pooled buffer and opened there (its data cannot be trusted, so cannot go to the file,
// before the tag is checked), then the data is written at its place with pwrite and the
// frame keeps a copy of the fields alone, so the large buffer returns to the pool at once.
// Fields that do not parse, and chunks the sink declines, stay in memory whole.
bool TcpConnection::read_sealed_weights(Frame& frame, WeightsSink& sink, ConstBytes header) {
  if (!read_payload(frame, header, {})) return false;
  const uint64_t length = frame.header.length;
  const uint8_t* payload = frame.storage.get();
  if (length < sizeof(uint32_t)) return true;
  uint32_t name_bytes;
  std::memcpy(&name_bytes, payload, sizeof name_bytes);
  const uint64_t head_bytes = weights_head_bytes(name_bytes);
  if (name_bytes > kMaxTensorNameBytes || head_bytes > length) return true;
  std::optional<WeightsHead> head;
  try {
    head = decode_weights_head(ConstBytes(payload, static_cast<size_t>(head_bytes)));
  } catch (const Error&) {
  }
  if (!head || head->n_bytes != length - head_bytes) return true;
  const std::optional<WeightsSink::Place> place = sink.place(*head);
  if (!place) return true;
  const bool written = pwrite_all(place->fd, payload + head_bytes,
                                  static_cast<size_t>(head->n_bytes), place->offset);
  sink.placed();
  if (!written) return false;
  PayloadStorage fields = allocate_payload(static_cast<size_t>(head_bytes));
  std::memcpy(fields.get(), payload, static_cast<size_t>(head_bytes));
  frame.storage = std::move(fields);
  frame.placed_bytes = head->n_bytes;
  return true;
}

bool TcpConnection::pwrite_all(int fd, const uint8_t* data, size_t n, uint64_t offset) {
  for (size_t done = 0; done < n;) {
    const ssize_t put = ::pwrite(fd, data + done, n - done, static_cast<off_t>(offset + done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      fail(std::string("cannot write received weights: ") +
           (put < 0 ? std::strerror(errno) : "the file took no bytes"));
      return false;
    }
    done += static_cast<size_t>(put);
  }
  return true;
}

bool TcpConnection::move_to_file(int fd, uint64_t offset, uint64_t n) {
#ifdef __linux__
  if (options_.splice_weights) return splice_to_file(fd, offset, n);
#endif
  return write_to_file(fd, offset, n);
}

// Moves n bytes from the socket into `fd` at `offset` through a buffer of 1 MiB: read,
// then pwrite at the place (what macOS does, having no splice; the chunk is never held
// whole). False when the connection ended or the file took no bytes (the failure is
// recorded).
bool TcpConnection::write_to_file(int fd, uint64_t offset, uint64_t n) {
  constexpr size_t kBufferBytes = size_t{1} << 20;
  if (file_buffer_.empty()) file_buffer_.resize(kBufferBytes);
  while (n > 0) {
    const size_t part = static_cast<size_t>(std::min<uint64_t>(n, file_buffer_.size()));
    if (!read_fully(file_buffer_.data(), part)) return false;
    if (!pwrite_all(fd, file_buffer_.data(), part, offset)) return false;
    offset += part;
    n -= part;
  }
  return true;
}

#ifdef __linux__
// Moves n bytes from the socket into `fd` at `offset` through a pipe: the kernel copies the
// socket's buffers into the file's page cache, and nothing passes through user memory (one
// copy instead of two). False when the connection ended (the failure is recorded).
bool TcpConnection::splice_to_file(int fd, uint64_t offset, uint64_t n) {
  constexpr size_t kPipeBytes = size_t{1} << 20;  // the default limit for unprivileged users
  if (splice_pipe_[0] < 0) {
    if (::pipe2(splice_pipe_, O_CLOEXEC) != 0) {
      fail(std::string("cannot make a pipe for received weights: ") + std::strerror(errno));
      return false;
    }
    ::fcntl(splice_pipe_[1], F_SETPIPE_SZ, static_cast<int>(kPipeBytes));  // else 64 KiB: slower
  }
  const int socket = impl_->socket.native_handle();
  auto at = static_cast<loff_t>(offset);
  while (n > 0) {
    ssize_t got = ::splice(socket, nullptr, splice_pipe_[1], nullptr,
                           std::min<uint64_t>(n, kPipeBytes), SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (got == 0) {
      fail("closed the connection");
      return false;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        if (!wait_readable(socket)) return false;
        continue;
      }
      fail(std::string("receive failed: ") + std::strerror(errno));
      return false;
    }
    mark_progress();
    n -= static_cast<uint64_t>(got);
    while (got > 0) {
      const ssize_t put =
          ::splice(splice_pipe_[0], nullptr, fd, &at, static_cast<size_t>(got), SPLICE_F_MOVE);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) {
        fail(std::string("cannot write received weights: ") +
             (put < 0 ? std::strerror(errno) : "the file took no bytes"));
        return false;
      }
      got -= put;
    }
  }
  return true;
}

// The socket has no bytes yet (Asio keeps it non-blocking): waits until it has, or has
// ended (the next splice says which); false once the connection failed or was closed.
bool TcpConnection::wait_readable(int socket) {
  for (;;) {
    pollfd p{socket, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) {
      fail(std::string("receive failed: ") + std::strerror(errno));
      return false;
    }
    std::lock_guard lock(mutex_);
    if (failure_ || closed_) return false;
  }
}
#endif

std::optional<Frame> TcpConnection::try_recv_frame(Millis timeout) {
  std::unique_lock lock(mutex_);
  if (!reader_started_) {
    if (failure_) throw_failure_locked();
    lock.unlock();
    return recv_direct(timeout);
  }
  changed_.wait_for(lock, clamp_timeout(timeout),
                    [&] { return !queue_.empty() || failure_.has_value(); });
  if (!queue_.empty()) {
    Frame frame = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= frame.payload().size();
    lock.unlock();
    changed_.notify_all();  // a paused reader may resume
    return frame;
  }
  if (failure_) throw_failure_locked();
  return std::nullopt;
}

// Before the handshake there is no reader thread: read one frame on this thread, with the
// handshake limits, each part bounded by the deadline. A timeout before the first byte
// leaves the stream intact (nullopt); one inside a frame fails the connection.
std::optional<Frame> TcpConnection::recv_direct(Millis timeout) {
  Clock::time_point deadline = Clock::now() + clamp_timeout(timeout);
  // Returns false on a clean timeout (only possible when `at_frame_start`).
  auto read_part = [&](uint8_t* data, size_t size, bool at_frame_start) -> bool {
    bool done = false;
    asio::error_code result;
    size_t transferred = 0;
    asio::async_read(impl_->socket, asio::buffer(data, size),
                     [&](const asio::error_code& ec, size_t n) {
                       result = ec;
                       transferred = n;
                       done = true;
                     });
    run_until(impl_->io, done, deadline, [&] {
      asio::error_code ignored;
      impl_->socket.cancel(ignored);
    });
    if (!result) {
      mark_progress();
      return true;
    }
    std::lock_guard lock(mutex_);
    if (result == asio::error::operation_aborted) {
      if (transferred == 0 && at_frame_start) return false;
      fail_locked("timed out in the middle of a frame");
    } else {
      fail_locked(result == asio::error::eof ? "closed the connection"
                                             : "receive failed: " + result.message());
    }
    throw_failure_locked();
  };

  std::array<uint8_t, kFrameHeaderSize> head;
  if (!read_part(head.data(), head.size(), true)) return std::nullopt;
  Frame frame;
  try {
    std::lock_guard lock(mutex_);
    frame.header = decode_header(head, limits_);
  } catch (const Error& e) {
    std::string reason = without_module(e.what());
    try {
      send_message(*this, 0, ErrorReply{ErrorCode::PROTOCOL, reason});
    } catch (const Error&) {
    }
    std::lock_guard lock(mutex_);
    fail_locked("sent a malformed frame: " + reason);
    throw_failure_locked();
  }
  const uint64_t wire = frame.header.length + (opener_ ? kFrameTagBytes : 0);
  frame.storage = pool_->allocate(wire);
  if (wire > 0) read_part(frame.storage.get(), wire, false);
  if (opener_ && !open_payload(head, frame.storage.get(), frame.header.length)) {
    std::lock_guard lock(mutex_);
    throw_failure_locked();
  }
  frames_received_.fetch_add(1, std::memory_order_relaxed);
  bytes_received_.fetch_add(kFrameHeaderSize + wire, std::memory_order_relaxed);
  if (frame.header.type == MessageType::BYE) {
    std::lock_guard lock(mutex_);
    fail_locked("said goodbye (BYE)");
    throw_failure_locked();
  }
  return frame;
}

void TcpConnection::close() {
  bool say_bye;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    say_bye = reader_started_ && !failure_;
  }
  if (say_bye) {
    try {
      try_send_frame(FrameHeader{MessageType::BYE, 0, 0, 0}, {});
    } catch (const Error&) {
    }
  }
  fail("connection closed by this node");
  if (reader_.joinable()) {
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();
    } else {
      reader_.join();
    }
  }
  std::lock_guard send_lock(send_mutex_);  // no writer is inside the socket any more
  std::lock_guard lock(mutex_);
  socket_closed_ = true;
  asio::error_code ignored;
  impl_->socket.close(ignored);
}

// ---------------------------------------------------------------------------------------
// TcpListener

struct TcpListener::Impl {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  std::string address;
};

TcpListener::TcpListener(std::unique_ptr<Impl> impl, const TcpOptions& options)
    : impl_(std::move(impl)), options_(options) {}

TcpListener::~TcpListener() {
  asio::error_code ignored;
  impl_->acceptor.close(ignored);
}

std::unique_ptr<TcpListener> TcpListener::bind(const ListenOptions& listen,
                                               const TcpOptions& options) {
  std::string what = "listen on " + join_address(listen.host, listen.port);
  auto impl = std::make_unique<Impl>();
  std::vector<asio::ip::tcp::endpoint> endpoints =
      resolve(impl->io, listen.host, listen.port, what);
  if (!listen.has_key && !listen.insecure_listen) {
    for (const auto& endpoint : endpoints) {
      if (!endpoint.address().is_loopback()) {
        throw Error("net", what +
                               ": refusing a non-loopback address without a cluster key, since "
                               "anyone who can reach the port could use this node; give every "
                               "node --key FILE (or HERD_KEY), or pass --insecure-listen on a "
                               "trusted network");
      }
    }
  }
  const asio::ip::tcp::endpoint& endpoint = endpoints.front();
  asio::error_code ec;
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error("net", what + ": " + ec.message());
  impl->address = endpoint_address(impl->acceptor.local_endpoint());
  return std::unique_ptr<TcpListener>(new TcpListener(std::move(impl), options));
}

uint16_t TcpListener::port() const {
  return impl_->acceptor.local_endpoint().port();
}

std::string TcpListener::address() const {
  return impl_->address;
}

std::shared_ptr<TcpConnection> TcpListener::accept(Millis timeout) {
  Clock::time_point deadline = Clock::now() + clamp_timeout(timeout);
  auto connection = std::make_unique<TcpConnection::Impl>();
  bool done = false;
  asio::error_code result;
  impl_->acceptor.async_accept(connection->socket, [&](const asio::error_code& ec) {
    result = ec;
    done = true;
  });
  run_until(impl_->io, done, deadline, [&] {
    asio::error_code ignored;
    impl_->acceptor.cancel(ignored);
  });
  if (result == asio::error::operation_aborted) return nullptr;
  if (result) throw Error("net", "accept on " + impl_->address + ": " + result.message());
  configure_socket(connection->socket, options_);
  asio::error_code ec;
  asio::ip::tcp::endpoint remote = connection->socket.remote_endpoint(ec);
  std::string address = ec ? std::string("unknown peer") : endpoint_address(remote);
  return std::make_shared<TcpConnection>(std::move(connection), address, options_);
}

}  // namespace herd::net
