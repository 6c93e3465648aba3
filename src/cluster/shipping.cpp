#include "cluster/shipping.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

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

// One verified chunk: the frame owns the bytes that `data` points into.
struct Chunk {
  net::Frame frame;
  std::span<const uint8_t> data;
};

// Receives the chunks of tensor `name`, `total` bytes of which `received` have arrived
// already, passing each verified chunk to `take` in order.
void receive_tensor(net::Connection& connection, const std::string& name, uint64_t total,
                    uint64_t received, net::Millis timeout,
                    const std::function<void(Chunk&&)>& take) {
  while (received < total) {
    Chunk chunk;
    net::Weights w = net::recv_message<net::Weights>(connection, timeout, chunk.frame);
    if (w.tensor_name != name) {
      throw Error("cluster", "weights: expected tensor '" + name + "', got '" +
                                 net::printable(w.tensor_name) + "'");
    }
    if (w.total_size != total || w.offset != received || w.data.size() > total - received) {
      throw Error("cluster", "weights: tensor '" + name + "': chunk at offset " +
                                 std::to_string(w.offset) + " of " + std::to_string(w.total_size) +
                                 " bytes, expected offset " + std::to_string(received) + " of " +
                                 std::to_string(total));
    }
    received += w.data.size();
    chunk.data = w.data;
    take(std::move(chunk));
  }
}

// Thrown on the receiving side when the writer stopped; the writer's error is the one reported.
struct WriteStopped {};

// Received chunks on their way from the session thread to the thread that writes the
// cache file, so that receiving and verifying the next chunk overlaps writing this one.
// Bounded by bytes (kMaxBytes, or one chunk of any size): three chunks of the size senders
// use (net::kWeightsChunkBytes), while a hostile sender's 64 MiB chunks wait one at a time,
// so the node holds little beyond the transport's own queue. Either side may stop it,
// which wakes the other. Thread-safety: push/abandon from one thread, pop/stop from another.
class ChunkQueue {
 public:
  static constexpr uint64_t kMaxBytes = 3 * net::kWeightsChunkBytes;

  // Waits for room; false when the writing side stopped (its error says why).
  bool push(Chunk&& chunk) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
      return chunks_.empty() || bytes_ + chunk.data.size() <= kMaxBytes || stopped_;
    });
    if (stopped_) return false;
    bytes_ += chunk.data.size();
    chunks_.push_back(std::move(chunk));
    changed_.notify_all();
    return true;
  }
  // The next chunk; throws when the receiving side abandoned the transfer before it came.
  Chunk pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !chunks_.empty() || abandoned_; });
    if (abandoned_) throw Error("cluster", "weights: transfer abandoned");
    Chunk chunk = std::move(chunks_.front());
    chunks_.pop_front();
    bytes_ -= chunk.data.size();
    changed_.notify_all();
    return chunk;
  }
  // The receiving side failed: the writer stops at its next pop.
  void abandon() { end(abandoned_); }
  // The writing side failed: the receiver stops at its next push.
  void stop() { end(stopped_); }

 private:
  void end(bool& flag) {
    std::lock_guard lock(mutex_);
    flag = true;
    chunks_.clear();
    bytes_ = 0;
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Chunk> chunks_;
  uint64_t bytes_ = 0;  // of the chunks waiting
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
  net::Frame first;
  net::Weights head = net::recv_message<net::Weights>(connection, timeout, first);
  const auto start = std::chrono::steady_clock::now();
  if (head.tensor_name != kMetadataName) {
    throw Error("cluster", "weights: expected the metadata first, got '" +
                               net::printable(head.tensor_name) + "'");
  }
  if (head.total_size > net::kMaxPlanJsonBytes * 16) {
    throw Error("cluster",
                "weights: metadata of " + std::to_string(head.total_size) + " bytes is too large");
  }
  if (head.offset != 0 || head.data.size() > head.total_size) {
    throw Error("cluster", "weights: metadata chunk out of order");
  }
  std::vector<uint8_t> metadata(head.total_size);
  std::memcpy(metadata.data(), head.data.data(), head.data.size());
  receive_tensor(connection, kMetadataName, metadata.size(), head.data.size(), timeout,
                 [&, at = head.data.size()](Chunk&& chunk) mutable {
                   std::memcpy(metadata.data() + at, chunk.data.data(), chunk.data.size());
                   at += chunk.data.size();
                 });
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
  // This thread receives and verifies; a second one writes the file. Chunks go from the
  // received frame straight to the file: no whole-tensor buffer.
  ChunkQueue queue;
  std::exception_ptr write_error;
  std::thread write_thread([&] {
    try {
      writer.write_streamed(path.string(), [&](size_t index, const gguf::Writer::Emit& emit) {
        for (uint64_t left = writer.tensor_bytes(index); left > 0;) {
          const Chunk chunk = queue.pop();
          emit(chunk.data);
          left -= std::min<uint64_t>(left, chunk.data.size());
        }
      });
    } catch (...) {
      write_error = std::current_exception();
      queue.stop();
    }
  });
  try {
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      receive_tensor(connection, a.tensors[i].name, writer.tensor_bytes(i), 0, timeout,
                     [&](Chunk&& chunk) {
                       if (!queue.push(std::move(chunk))) throw WriteStopped{};
                     });
    }
  } catch (const WriteStopped&) {
    // The writer's error, rethrown below, says why.
  } catch (...) {
    queue.abandon();  // the writer removes the partial file
    write_thread.join();
    throw;
  }
  write_thread.join();
  if (write_error) std::rethrow_exception(write_error);
  ShipStats stats;
  stats.bytes = metadata.size();
  for (size_t i = 0; i < a.tensors.size(); ++i) stats.bytes += writer.tensor_bytes(i);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace herd::cluster
