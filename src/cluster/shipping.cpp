#include "cluster/shipping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "gguf/writer.h"
#include "util/error.h"

namespace herd::cluster {
namespace fs = std::filesystem;
namespace {

// The model's metadata as a GGUF file with no tensors, and the slice a rank's tensors are
// cut to (none for a whole stage: its file is a plain part of the model).
std::vector<uint8_t> metadata_bytes(const gguf::File& file, const ModelInfo& info,
                                    const Assignment& a) {
  gguf::Writer writer(file.alignment());
  for (const auto& [key, value] : file.metadata()) writer.set_value(key, value);
  if (a.shard.slice != TensorSlice{}) write_slice_metadata(writer, a.shard.slice, info.hp.n_vocab);
  return writer.header();
}

// Where a transfer stands: frames sent, bytes done of all, whom to tell.
struct Shipment {
  net::Connection& connection;
  uint64_t frame_id = 0;
  uint64_t done = 0, total = 0;
  const ShipProgress& progress;
};

// Sends one tensor as WEIGHTS chunks of at most net::kWeightsChunkBytes, from pieces given
// in order: whole chunks go straight from the caller's memory (the mapped model), while
// small pieces (the rows of a column cut) are gathered into one chunk first.
class TensorSender {
 public:
  TensorSender(Shipment& shipment, std::string name, uint64_t size)
      : shipment_(shipment), name_(std::move(name)), size_(size) {}

  void add(std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      const uint64_t left = size_ - sent_ - staged_.size();
      if (staged_.empty() && (bytes.size() >= net::kWeightsChunkBytes || bytes.size() == left)) {
        const size_t n = std::min<size_t>(bytes.size(), net::kWeightsChunkBytes);
        send(bytes.first(n));
        bytes = bytes.subspan(n);
        continue;
      }
      const size_t n = std::min<size_t>(bytes.size(), net::kWeightsChunkBytes - staged_.size());
      staged_.insert(staged_.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
      bytes = bytes.subspan(n);
      if (staged_.size() == net::kWeightsChunkBytes || sent_ + staged_.size() == size_) {
        send(staged_);
        staged_.clear();
      }
    }
  }
  // REQUIRES: exactly `size` bytes were added.
  void finish() const { HERD_CHECK(sent_ == size_ && staged_.empty()); }

 private:
  void send(std::span<const uint8_t> data) {
    net::Weights w;
    w.tensor_name = name_;
    w.offset = sent_;
    w.total_size = size_;
    w.data = data;
    w.chunk_hash = net::chunk_hash(w.data);
    net::send_message(shipment_.connection, ++shipment_.frame_id, w);
    sent_ += data.size();
    shipment_.done += data.size();
    if (shipment_.progress) shipment_.progress(shipment_.done, shipment_.total);
  }

  Shipment& shipment_;
  std::string name_;
  uint64_t size_ = 0, sent_ = 0;
  std::vector<uint8_t> staged_;  // at most one chunk
};

// One chunk as it arrived: its data in memory (verified by the decoder), or already in the
// file (placed by the transport through a WeightsSink; verified where it landed).
struct Chunk {
  net::Frame frame;  // owns the fields and, in memory, `data`
  std::string tensor_name;
  uint64_t offset = 0, total_size = 0, n_bytes = 0, chunk_hash = 0;
  std::span<const uint8_t> data;  // empty when placed
  bool placed = false;
};

Chunk receive_chunk(net::Connection& connection, net::Millis timeout) {
  Chunk chunk;
  chunk.frame = connection.recv_frame(timeout);
  if (chunk.frame.placed_bytes > 0) {
    net::WeightsHead h = net::decode_weights_head(chunk.frame.payload());
    chunk.tensor_name = std::move(h.tensor_name);
    chunk.offset = h.offset;
    chunk.total_size = h.total_size;
    chunk.n_bytes = h.n_bytes;
    chunk.chunk_hash = h.chunk_hash;
    chunk.placed = true;
    return chunk;
  }
  net::Weights w = net::expect_message<net::Weights>(chunk.frame, connection.peer_name());
  chunk.tensor_name = std::move(w.tensor_name);
  chunk.offset = w.offset;
  chunk.total_size = w.total_size;
  chunk.n_bytes = w.data.size();
  chunk.chunk_hash = w.chunk_hash;
  chunk.data = w.data;
  return chunk;
}

// Throws unless `chunk` is the next piece of tensor `name` (`total` bytes, `received` so far).
void check_next(const Chunk& chunk, const std::string& name, uint64_t total, uint64_t received) {
  if (chunk.tensor_name != name) {
    throw Error("cluster", "weights: expected tensor '" + name + "', got '" +
                               net::printable(chunk.tensor_name) + "'");
  }
  if (chunk.total_size != total || chunk.offset != received || chunk.n_bytes > total - received) {
    throw Error("cluster", "weights: tensor '" + name + "': chunk at offset " +
                               std::to_string(chunk.offset) + " of " +
                               std::to_string(chunk.total_size) + " bytes, expected offset " +
                               std::to_string(received) + " of " + std::to_string(total));
  }
}

// The cache file being received: "<path>.tmp", sized for the whole shard with its GGUF
// header written first. Chunks land at their tensor's place (spliced there by the transport,
// or written from memory), and a read-only mapping lets each placed chunk be verified where
// it landed. The file is removed unless commit() renamed it into place.
class ShardFile {
 public:
  ShardFile(const fs::path& path, const gguf::Writer& writer)
      : path_(path), tmp_(path.string() + ".tmp") {
    const std::vector<uint8_t> header = writer.header();
    data_start_ = header.size();
    size_ = data_start_ + writer.total_tensor_bytes();
    fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create");
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) fail("cannot size");
    write(0, header);
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED) fail("cannot map");
    map_ = static_cast<const uint8_t*>(map);
  }
  ~ShardFile() {
    close();
    if (!committed_) ::unlink(tmp_.c_str());
  }
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  int fd() const { return fd_; }
  uint64_t data_start() const { return data_start_; }
  void write(uint64_t at, std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write");
      bytes = bytes.subspan(static_cast<size_t>(n));
      at += static_cast<uint64_t>(n);
    }
  }
  std::span<const uint8_t> bytes(uint64_t at, uint64_t n) const { return {map_ + at, n}; }
  // REQUIRES: nothing writes to the file any more.
  void commit() {
    close();
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) throw Error("cluster", "weights: cannot rename '" + tmp_ + "': " + ec.message());
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw Error("cluster",
                std::string("weights: ") + what + " '" + tmp_ + "': " + std::strerror(errno));
  }
  void close() {
    if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), size_);
    map_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  const fs::path path_;
  const std::string tmp_;
  uint64_t data_start_ = 0, size_ = 0;
  int fd_ = -1;
  const uint8_t* map_ = nullptr;
  bool committed_ = false;
};

// Tells the transport where each tensor's chunks go in the ShardFile. Chunks are placed
// only going forward (each after the end of the one before), so no chunk can land over
// bytes already verified; anything else is declined and arrives in memory, where the
// receiver reports it. Thread-safety: place/placed on the transport's reader thread,
// close on the receiving thread.
class ShardSink final : public net::WeightsSink {
 public:
  ShardSink(std::shared_ptr<ShardFile> file, const Assignment& a, const gguf::Writer& writer)
      : file_(std::move(file)) {
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      tensors_.emplace(a.tensors[i].name, Region{i, file_->data_start() + writer.tensor_offset(i),
                                                 writer.tensor_bytes(i)});
    }
  }
  std::optional<Place> place(const net::WeightsHead& chunk) override {
    std::lock_guard lock(mutex_);
    const auto it = tensors_.find(chunk.tensor_name);
    if (closed_ || it == tensors_.end() || chunk.total_size != it->second.bytes)
      return std::nullopt;
    const std::pair<size_t, uint64_t> at{it->second.index, chunk.offset};
    if (at < next_) return std::nullopt;
    next_ = {it->second.index, chunk.offset + chunk.n_bytes};
    ++in_flight_;
    return Place{file_->fd(), it->second.start + chunk.offset};
  }
  void placed() override {
    std::lock_guard lock(mutex_);
    --in_flight_;
    changed_.notify_all();
  }
  // Places nothing more. With `settle`, returns once a chunk being written has landed, so
  // the file is final (after a complete transfer only an empty chunk can still be placed);
  // a failed transfer does not wait: a stalled sender could hold a chunk forever, and the
  // file, unlinked with its last reference, is never read.
  void close(bool settle) {
    std::unique_lock lock(mutex_);
    closed_ = true;
    if (settle) changed_.wait(lock, [&] { return in_flight_ == 0; });
  }

 private:
  struct Region {
    size_t index;
    uint64_t start, bytes;
  };
  const std::shared_ptr<ShardFile> file_;
  std::unordered_map<std::string, Region> tensors_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::pair<size_t, uint64_t> next_{0, 0};  // (tensor, offset) the next chunk may start at
  int in_flight_ = 0;
  bool closed_ = false;
};

// Thrown on the receiving side when the writer stopped; the writer's error is the one reported.
struct WriteStopped {};

// A chunk that arrived in memory, on its way to the file at `at`.
struct Pending {
  Chunk chunk;
  uint64_t at = 0;
};

// Chunks that arrived in memory, on their way from the session thread to the thread that
// writes them into the file, so that receiving and verifying the next chunk overlaps
// writing this one. Bounded by bytes (kMaxBytes, or one chunk of any size): three chunks
// of the size senders use (net::kWeightsChunkBytes), while a hostile sender's 64 MiB
// chunks wait one at a time, so the node holds little beyond the transport's own queue.
// Either side may stop it, which wakes the other. Thread-safety: push/finish/abandon
// from one thread, pop/stop from another.
class ChunkQueue {
 public:
  static constexpr uint64_t kMaxBytes = 3 * net::kWeightsChunkBytes;

  // Waits for room; false when the writing side stopped (its error says why).
  bool push(Pending&& pending) {
    std::unique_lock lock(mutex_);
    const uint64_t n = pending.chunk.n_bytes;
    changed_.wait(lock, [&] { return chunks_.empty() || bytes_ + n <= kMaxBytes || stopped_; });
    if (stopped_) return false;
    bytes_ += n;
    chunks_.push_back(std::move(pending));
    changed_.notify_all();
    return true;
  }
  // The next chunk; nullopt once finished and empty; throws when the receiving side
  // abandoned the transfer.
  std::optional<Pending> pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !chunks_.empty() || finished_ || abandoned_; });
    if (abandoned_) throw Error("cluster", "weights: transfer abandoned");
    if (chunks_.empty()) return std::nullopt;
    Pending pending = std::move(chunks_.front());
    chunks_.pop_front();
    bytes_ -= pending.chunk.n_bytes;
    changed_.notify_all();
    return pending;
  }
  // Every chunk is pushed: the writer stops once it wrote them.
  void finish() { end(finished_); }
  // The receiving side failed: the writer stops at its next pop.
  void abandon() { end(abandoned_); }
  // The writing side failed: the receiver stops at its next push.
  void stop() { end(stopped_); }

 private:
  void end(bool& flag) {
    std::lock_guard lock(mutex_);
    flag = true;
    if (&flag != &finished_) {
      chunks_.clear();
      bytes_ = 0;
    }
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> chunks_;
  uint64_t bytes_ = 0;  // of the chunks waiting
  bool finished_ = false;
  bool abandoned_ = false;
  bool stopped_ = false;
};

}  // namespace

uint64_t tensor_bytes(const Assignment& a) {
  uint64_t total = 0;
  for (const TensorDesc& t : a.tensors) total += data_bytes(t);
  return total;
}

ShipStats ship_weights(net::Connection& connection, const gguf::File& file, const ModelInfo& info,
                       const Assignment& a, const ShipProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint8_t> metadata = metadata_bytes(file, info, a);
  Shipment shipment{connection, 0, 0, metadata.size() + tensor_bytes(a), progress};
  TensorSender(shipment, kMetadataName, metadata.size()).add(metadata);
  for (const TensorDesc& t : a.tensors) {
    const gguf::TensorInfo& whole = file.tensor(t.name);
    // Tensors the model's table does not list (rope_freqs) are never cut.
    const TensorSpec* spec = find_tensor_spec(info, t.name);
    const WeightCut cut = spec != nullptr ? weight_cut(*spec, a.shard.slice, info.hp) : WeightCut{};
    HERD_CHECK(cut_shape(t.name, whole.type, whole.shape, cut) == t.shape);
    TensorSender sender(shipment, t.name, data_bytes(t));
    for_each_cut_run(whole.type, whole.shape, cut, [&](uint64_t offset, uint64_t size) {
      sender.add(whole.bytes().subspan(offset, size));
    });
    sender.finish();
    // The pages read for sending are not needed again (a stage this process runs maps them
    // back in on use): do not let shipping inflate the coordinator's memory.
    file.release(whole);
  }
  ShipStats stats;
  stats.bytes = shipment.done;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

ShipStats receive_weights(net::Connection& connection, const Assignment& a, const fs::path& path,
                          net::Millis timeout) {
  // The metadata first: a GGUF file with no tensors, parsed like any other.
  Chunk head = receive_chunk(connection, timeout);
  const auto start = std::chrono::steady_clock::now();
  if (head.tensor_name != kMetadataName) {
    throw Error("cluster", "weights: expected the metadata first, got '" +
                               net::printable(head.tensor_name) + "'");
  }
  if (head.total_size > net::kMaxPlanJsonBytes * 16) {
    throw Error("cluster",
                "weights: metadata of " + std::to_string(head.total_size) + " bytes is too large");
  }
  std::vector<uint8_t> metadata;
  for (;;) {
    check_next(head, kMetadataName, head.total_size, metadata.size());
    if (head.placed) throw Error("cluster", "weights: the metadata was placed in a file");
    if (metadata.empty()) metadata.reserve(head.total_size);
    metadata.insert(metadata.end(), head.data.begin(), head.data.end());
    if (metadata.size() == head.total_size) break;
    head = receive_chunk(connection, timeout);
  }
  const gguf::File meta = gguf::File::parse(metadata, "metadata from the coordinator");
  if (!meta.tensors().empty()) throw Error("cluster", "weights: the metadata declares tensors");
  // The slice the file will say it holds must be the one this node was told to run.
  if (const std::optional<FileSlice> held = read_slice_metadata(meta);
      held && held->slice != a.shard.slice) {
    throw Error("cluster", "weights: the metadata's slice (herd.slice.*) is not the assignment's");
  }

  gguf::Writer writer(meta.alignment());
  for (const auto& [key, value] : meta.metadata()) writer.set_value(key, value);
  for (const TensorDesc& t : a.tensors) writer.add_tensor(t.name, t.type, t.shape);

  fs::create_directories(path.parent_path());
  auto file = std::make_shared<ShardFile>(path, writer);
  // From here the transport may put chunks straight into the file (Linux); the chunks it
  // read before, and every chunk elsewhere, arrive in memory and a second thread writes them,
  // so that receiving and verifying the next chunk overlaps writing this one.
  auto sink = std::make_shared<ShardSink>(file, a, writer);
  connection.set_weights_sink(sink);
  auto stop_placing = [&](bool settle) {
    connection.set_weights_sink(nullptr);
    sink->close(settle);
  };
  ShipStats stats;
  ChunkQueue queue;
  std::exception_ptr write_error;
  std::thread write_thread([&] {
    try {
      while (std::optional<Pending> pending = queue.pop())
        file->write(pending->at, pending->chunk.data);
    } catch (...) {
      write_error = std::current_exception();
      queue.stop();
    }
  });
  try {
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      const std::string& name = a.tensors[i].name;
      const uint64_t total = writer.tensor_bytes(i);
      const uint64_t at = file->data_start() + writer.tensor_offset(i);
      for (uint64_t received = 0; received < total;) {
        Chunk chunk = receive_chunk(connection, timeout);
        check_next(chunk, name, total, received);
        const uint64_t chunk_at = at + received;
        received += chunk.n_bytes;
        if (chunk.placed) {
          stats.placed_bytes += chunk.n_bytes;
          if (net::chunk_hash(file->bytes(chunk_at, chunk.n_bytes)) != chunk.chunk_hash) {
            throw Error("cluster", "weights: tensor '" + name + "' chunk at offset " +
                                       std::to_string(chunk.offset) +
                                       " does not match its hash (corrupted)");
          }
        } else if (!queue.push(Pending{std::move(chunk), chunk_at})) {
          throw WriteStopped{};
        }
      }
    }
    queue.finish();
  } catch (const WriteStopped&) {
    // The writer's error, rethrown below, says why.
  } catch (...) {
    queue.abandon();
    write_thread.join();
    stop_placing(false);
    throw;  // the file is removed with the last reference to it
  }
  write_thread.join();
  stop_placing(!write_error);
  if (write_error) std::rethrow_exception(write_error);
  file->commit();
  stats.bytes = metadata.size();
  for (size_t i = 0; i < a.tensors.size(); ++i) stats.bytes += writer.tensor_bytes(i);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace herd::cluster
