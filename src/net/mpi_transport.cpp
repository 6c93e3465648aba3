// The MPI transport (mpi_transport.h): channels between ranks over MPI point-to-point.
#include "net/mpi_transport.h"

// MPI's C API only: Open MPI's and MPICH's mpi.h otherwise pull in the deprecated C++
// bindings, which need libmpi_cxx at link time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "net/payload_pool.h"
#include "util/error.h"

namespace herd::net {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kControlTag = 0;
constexpr uint32_t kConnect = 1;
constexpr uint32_t kFinish = 2;
constexpr size_t kControlBytes = 8;  // u32 kind | u32 channel
// Received payloads of 1 MiB and more (weights chunks, prefill activations) reuse buffers.
constexpr size_t kPoolBytes = size_t{64} << 20;

// The back-off while nothing arrives (or a send waits): yield for this long after the last
// message, then sleep in short steps, then in longer ones once the rank is idle. A blocking
// MPI_Mprobe would spin a whole core per rank inside Open MPI's progress loop forever, which
// a 2-core machine running three ranks cannot afford. 2 ms keeps a stage that waits for its
// next decode step's input hot: with 300 us a 2-stage pipeline of a tiny model decoded at
// 1324 tok/s (the 50 us sleeps, which take longer on a loaded machine, on every hop), with
// 2 ms at 4529 tok/s, TCP at 2504 (docs/performance.md, "MPI transport").
constexpr auto kHotPoll = std::chrono::microseconds(2000);
constexpr auto kWarmPoll = std::chrono::milliseconds(20);
constexpr auto kWarmSleep = std::chrono::microseconds(50);
constexpr auto kColdSleep = std::chrono::microseconds(500);

// Waiting for MPI (a message to arrive, a send to complete) for `idle` so far: yield at
// first, then sleep in short steps, then in longer ones.
void back_off(Clock::duration idle) {
  if (idle < kHotPoll) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(idle < kWarmPoll ? kWarmSleep : kColdSleep);
  }
}

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return std::string(text, static_cast<size_t>(std::max(length, 0)));
}

void check_mpi(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw Error("net", "mpi: " + what + ": " + mpi_error_text(rc));
}

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "level " + std::to_string(level);
  }
}

}  // namespace

class MpiConnection;

struct MpiTransport::Impl : std::enable_shared_from_this<MpiTransport::Impl> {
  MpiTransportOptions options;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;  // the least MPI promises; the library's MPI_TAG_UB replaces it
  std::thread receiver;
  std::atomic<bool> stopping{false};  // the destructor began: no new sends or channels

  mutable std::mutex mutex;  // guards what follows
  std::condition_variable changed;
  int sending = 0;  // MPI_Send calls in progress (finalising waits for them)
  uint32_t next_channel = 0;
  // By (peer rank, tag the peer sends with). Weak: a connection nobody holds is gone, and
  // frames for it are dropped as on a closed socket.
  std::map<std::pair<int, int>, std::weak_ptr<MpiConnection>> channels;
  std::deque<std::shared_ptr<MpiConnection>> accepted;
  std::vector<char> finished;  // [size]: that rank began shutting down

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  // One MPI message to `peer`; throws herd::Error once shutting down or on an MPI error.
  void send(int peer, int tag, const void* data, size_t n);
  void forget(int peer, int tag);
  void run();  // the receiver thread
  void dispatch(int source, int tag, const uint8_t* data, size_t n);
  void control(int source, const uint8_t* data, size_t n);
};

// One channel to a peer rank. Thread-safety as Connection requires: sends serialised by
// send_mutex_, the rest under mutex_.
class MpiConnection final : public Connection {
 public:
  MpiConnection(std::shared_ptr<MpiTransport::Impl> transport, int peer, uint32_t channel,
                bool opener)
      : transport_(std::move(transport)),
        peer_(peer),
        send_tag_(1 + 2 * static_cast<int>(channel) + (opener ? 0 : 1)),
        recv_tag_(1 + 2 * static_cast<int>(channel) + (opener ? 1 : 0)),
        name_(MpiTransport::address_of(peer)),
        limits_(transport_->options.limits),
        pool_(PayloadPool::create(kPoolBytes)) {
    limits_.handshake_only = false;  // ranks trust each other: no handshake to wait for
  }
  ~MpiConnection() override { close(); }

  int peer() const { return peer_; }
  int recv_tag() const { return recv_tag_; }

  void send_frame_parts(const FrameHeader& header, std::span<const ConstBytes> parts) override {
    std::lock_guard send_lock(send_mutex_);
    send_locked(header, parts);
  }

  bool try_send_frame(const FrameHeader& header, ConstBytes payload) override {
    std::unique_lock send_lock(send_mutex_, std::try_to_lock);
    if (!send_lock.owns_lock()) return false;
    send_locked(header, std::span(&payload, 1));
    return true;
  }

  std::optional<Frame> try_recv_frame(Millis timeout) override {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::min<Millis>(timeout, std::chrono::hours(24 * 365)),
                      [&] { return !inbox_.empty() || failure_.has_value(); });
    if (!inbox_.empty()) {
      Frame frame = std::move(inbox_.front());
      inbox_.pop_front();
      return frame;
    }
    if (failure_) throw Error("net", "peer '" + name_ + "': " + *failure_);
    return std::nullopt;
  }

  void fail(const std::string& reason) override {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = reason;
    changed_.notify_all();
  }

  void close() override {
    bool was_open = false;
    {
      std::lock_guard lock(mutex_);
      was_open = !failure_.has_value();
    }
    if (was_open) {
      try {
        send_frame(MessageType::BYE, 0, {});
      } catch (const std::exception&) {
        // Best effort: the peer may be finishing already.
      }
    }
    fail("connection closed by this node");
    transport_->forget(peer_, recv_tag_);
  }

  bool is_open() const override {
    std::lock_guard lock(mutex_);
    return !failure_.has_value();
  }

  // A rank cannot fall silent without the job failing (mpirun aborts every rank when one
  // dies), so heartbeats never time an MPI peer out: a busy, oversubscribed rank that is
  // slow to poll must not be taken for a lost one.
  Millis silent_for() const override { return Millis(0); }

  std::string peer_name() const override {
    std::lock_guard lock(mutex_);
    return name_;
  }

  void finish_handshake(const std::string& name, const FrameLimits& limits) override {
    std::lock_guard lock(mutex_);
    name_ = name;
    limits_ = limits;
    limits_.handshake_only = false;
  }

  ConnectionStats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  // On the receiver thread: one MPI message of this channel (header and payload).
  void deliver(const uint8_t* data, size_t n) {
    std::lock_guard lock(mutex_);
    if (failure_) return;
    FrameHeader header;
    try {
      if (n < kFrameHeaderSize) {
        throw Error("net", "frame: " + std::to_string(n) + " bytes, shorter than a header");
      }
      header = decode_header(ConstBytes(data, kFrameHeaderSize), limits_);
      if (header.length != n - kFrameHeaderSize) {
        throw Error("net", "frame: header says " + std::to_string(header.length) +
                               " payload bytes, the message holds " +
                               std::to_string(n - kFrameHeaderSize));
      }
    } catch (const Error& e) {
      failure_ = std::string("sent a malformed frame: ") + e.what();
      changed_.notify_all();
      return;
    }
    stats_.frames_received += 1;
    stats_.bytes_received += n;
    if (header.type == MessageType::PING || header.type == MessageType::PONG) return;
    if (header.type == MessageType::BYE) {
      failure_ = "said goodbye (BYE)";
    } else {
      Frame frame;
      frame.header = header;
      frame.storage = header.length >= PayloadPool::kMinPooledBytes
                          ? pool_->allocate(header.length)
                          : allocate_payload(header.length);
      if (header.length > 0) {
        std::memcpy(frame.storage.get(), data + kFrameHeaderSize, header.length);
      }
      inbox_.push_back(std::move(frame));
    }
    changed_.notify_all();
  }

 private:
  void send_locked(const FrameHeader& header, std::span<const ConstBytes> parts) {
    {
      std::lock_guard lock(mutex_);
      if (failure_) throw Error("net", "peer '" + name_ + "': " + *failure_);
    }
    FrameHeader h = header;
    h.length = 0;
    for (ConstBytes part : parts) h.length += part.size();
    // One message per frame: the parts are gathered into one buffer (reused while its size
    // fits), which costs a copy of the payload; see docs/cluster.md.
    const size_t total = kFrameHeaderSize + h.length;
    if (send_buffer_.size() < total) send_buffer_.resize(total);
    const std::array<uint8_t, kFrameHeaderSize> head = encode_header(h);
    std::memcpy(send_buffer_.data(), head.data(), head.size());
    size_t at = kFrameHeaderSize;
    for (ConstBytes part : parts) {
      if (!part.empty()) std::memcpy(send_buffer_.data() + at, part.data(), part.size());
      at += part.size();
    }
    try {
      transport_->send(peer_, send_tag_, send_buffer_.data(), total);
    } catch (const Error& e) {
      fail(e.what());
      throw Error("net", "peer '" + peer_name() + "': " + e.what());
    }
    if (send_buffer_.size() > (size_t{64} << 20)) send_buffer_ = {};  // not pinned for good
    std::lock_guard lock(mutex_);
    stats_.frames_sent += 1;
    stats_.bytes_sent += total;
  }

  const std::shared_ptr<MpiTransport::Impl> transport_;
  const int peer_;
  const int send_tag_;
  const int recv_tag_;
  std::mutex send_mutex_;
  std::vector<uint8_t> send_buffer_;  // guarded by send_mutex_

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable changed_;
  std::string name_;
  FrameLimits limits_;
  std::optional<std::string> failure_;
  std::deque<Frame> inbox_;
  ConnectionStats stats_;
  std::shared_ptr<PayloadPool> pool_;
};

void MpiTransport::Impl::send(int peer, int tag, const void* data, size_t n) {
  if (n > static_cast<size_t>(INT32_MAX)) {
    throw Error("net", "mpi: a message of " + std::to_string(n) + " bytes exceeds MPI's int count");
  }
  {
    std::lock_guard lock(mutex);
    if (stopping) throw Error("net", "mpi: the transport is shutting down");
    ++sending;
  }
  // Not MPI_Send: a blocking send spins inside the library until the peer's receiver thread
  // takes the message (Open MPI's rendezvous above 4 KiB on shared memory), and a job that
  // MPI does not count as oversubscribed (2 ranks on 2 cores, each with its receiver thread)
  // spins without yielding: the peer's receiver then waits for a core, and a 2-rank
  // all-reduce of 2048 floats took 8 ms instead of 24 us. Waiting here yields instead.
  // Not under `mutex`: the receiver thread must keep dispatching meanwhile.
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Isend(data, static_cast<int>(n), MPI_BYTE, peer, tag, comm, &request);
  const auto start = Clock::now();
  while (rc == MPI_SUCCESS) {
    int done = 0;
    rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) break;
    // The sending thread has nothing else to do: it stays hot longer than the receiver.
    const auto waited = Clock::now() - start;
    if (waited < kWarmPoll) {
      std::this_thread::yield();
    } else {
      back_off(waited);
    }
  }
  {
    std::lock_guard lock(mutex);
    --sending;
  }
  changed.notify_all();
  check_mpi(rc, "send to rank " + std::to_string(peer));
}

void MpiTransport::Impl::forget(int peer, int tag) {
  std::lock_guard lock(mutex);
  channels.erase({peer, tag});
}

void MpiTransport::Impl::run() {
  PayloadStorage buffer;
  size_t capacity = 0;
  MPI_Request barrier = MPI_REQUEST_NULL;
  bool finishing = false;
  auto last = Clock::now();
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &message, &status);
    if (flag) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      const size_t n = static_cast<size_t>(std::max(count, 0));
      if (n > capacity) {
        capacity = std::max(n, capacity * 2);
        buffer = allocate_payload(capacity);  // uninitialised: MPI_Mrecv fills it
      }
      MPI_Mrecv(buffer.get(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
      dispatch(status.MPI_SOURCE, status.MPI_TAG, buffer.get(), n);
      if (capacity > (size_t{128} << 20)) {  // a huge frame does not pin its buffer
        buffer.reset();
        capacity = 0;
      }
      last = Clock::now();
      continue;
    }
    if (finishing) {
      // Every rank sent its FINISH before entering the barrier; once it completes nobody
      // sends any more, and the receiver may stop.
      int done = 0;
      MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
      if (done) return;
    } else if (stopping) {
      uint8_t finish[kControlBytes];
      put_u32(finish, kFinish);
      put_u32(finish + 4, 0);
      for (int r = 0; r < size; ++r) {
        if (r != rank) MPI_Send(finish, kControlBytes, MPI_BYTE, r, kControlTag, comm);
      }
      MPI_Ibarrier(comm, &barrier);
      finishing = true;
      continue;
    }
    back_off(Clock::now() - last);
  }
}

void MpiTransport::Impl::dispatch(int source, int tag, const uint8_t* data, size_t n) {
  if (tag == kControlTag) return control(source, data, n);
  std::shared_ptr<MpiConnection> connection;
  {
    std::lock_guard lock(mutex);
    auto it = channels.find({source, tag});
    if (it != channels.end()) connection = it->second.lock();
  }
  // Nobody holds the channel any more (closed here): dropped, as bytes on a closed socket.
  if (connection) connection->deliver(data, n);
}

void MpiTransport::Impl::control(int source, const uint8_t* data, size_t n) {
  if (n != kControlBytes) {
    log("mpi: dropped a control message of " + std::to_string(n) + " bytes from rank " +
        std::to_string(source));
    return;
  }
  const uint32_t kind = get_u32(data);
  const uint32_t channel = get_u32(data + 4);
  if (kind == kConnect) {
    auto connection = std::make_shared<MpiConnection>(shared_from_this(), source, channel, false);
    std::lock_guard lock(mutex);
    if (stopping) return;
    channels[{source, connection->recv_tag()}] = connection;
    accepted.push_back(std::move(connection));
    changed.notify_all();
    return;
  }
  if (kind == kFinish) {
    std::vector<std::shared_ptr<MpiConnection>> to_fail;
    {
      std::lock_guard lock(mutex);
      finished[static_cast<size_t>(source)] = 1;
      for (auto& [key, weak] : channels) {
        if (key.first != source) continue;
        if (auto c = weak.lock()) to_fail.push_back(std::move(c));
      }
      changed.notify_all();
    }
    for (auto& c : to_fail) c->fail("rank " + std::to_string(source) + " has finished");
    return;
  }
  log("mpi: dropped a control message of unknown kind " + std::to_string(kind) + " from rank " +
      std::to_string(source));
}

MpiTransport::MpiTransport(MpiTransportOptions options) : impl_(std::make_shared<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw Error("net", "mpi: MPI is initialised already (one MpiTransport only)");
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    // herd sends from several threads (stage workers, heartbeats, the ring) while the
    // receiver thread probes: without MPI_THREAD_MULTIPLE that is undefined behaviour.
    throw Error("net", "mpi: the MPI library offers " + thread_level_name(provided) +
                           ", herd needs MPI_THREAD_MULTIPLE (Open MPI and MPICH provide it; "
                           "rebuild the library with thread support)");
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &s.comm);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  if (found && tag_ub) s.tag_ub = *tag_ub;
  s.finished.assign(static_cast<size_t>(s.size), 0);
  s.receiver = std::thread(&Impl::run, &s);
}

MpiTransport::~MpiTransport() {
  Impl& s = *impl_;
  std::deque<std::shared_ptr<MpiConnection>> unclaimed;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
    unclaimed.swap(s.accepted);
  }
  unclaimed.clear();  // outside the lock: closing a connection takes it
  s.receiver.join();
  {
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return s.sending == 0; });
  }
  MPI_Comm_free(&s.comm);
  MPI_Finalize();
}

int MpiTransport::rank() const {
  return impl_->rank;
}

int MpiTransport::size() const {
  return impl_->size;
}

bool MpiTransport::finished(int rank) const {
  std::lock_guard lock(impl_->mutex);
  return rank >= 0 && rank < impl_->size && impl_->finished[static_cast<size_t>(rank)];
}

std::shared_ptr<Connection> MpiTransport::connect(const std::string& address, Millis timeout) {
  (void)timeout;  // nothing to wait for: the peer's receiver takes the CONNECT when it comes
  Impl& s = *impl_;
  const int peer = parse_rank_address(address);
  if (peer >= s.size) {
    throw Error("net", "mpi: " + address + ": the job has " + std::to_string(s.size) + " ranks");
  }
  if (peer == s.rank) throw Error("net", "mpi: " + address + " is this rank");
  std::shared_ptr<MpiConnection> connection;
  uint32_t channel = 0;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) throw Error("net", "mpi: the transport is shutting down");
    if (s.finished[static_cast<size_t>(peer)]) {
      throw Error("net", "mpi: " + address + " has finished");
    }
    channel = s.next_channel;
    if (2 * static_cast<int64_t>(channel) + 2 > s.tag_ub) {
      throw Error("net", "mpi: out of tags (" + std::to_string(channel) +
                             " channels opened; MPI_TAG_UB is " + std::to_string(s.tag_ub) + ")");
    }
    ++s.next_channel;
    connection = std::make_shared<MpiConnection>(impl_, peer, channel, true);
    // Registered before the CONNECT goes out, so the peer's first frame finds it.
    s.channels[{peer, connection->recv_tag()}] = connection;
  }
  uint8_t message[kControlBytes];
  put_u32(message, kConnect);
  put_u32(message + 4, channel);
  try {
    s.send(peer, kControlTag, message, sizeof message);
  } catch (const Error& e) {
    s.forget(peer, connection->recv_tag());
    throw Error("net", "mpi: " + address + ": " + e.what());
  }
  return connection;
}

std::shared_ptr<Connection> MpiTransport::accept(Millis timeout) {
  Impl& s = *impl_;
  std::unique_lock lock(s.mutex);
  s.changed.wait_for(lock, std::min<Millis>(timeout, std::chrono::hours(24 * 365)),
                     [&] { return !s.accepted.empty() || s.stopping; });
  if (s.accepted.empty()) return nullptr;
  std::shared_ptr<Connection> connection = std::move(s.accepted.front());
  s.accepted.pop_front();
  return connection;
}

}  // namespace herd::net
