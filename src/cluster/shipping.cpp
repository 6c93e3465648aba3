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

// The model's metadata as a GGUF file with no tensors.
std::vector<uint8_t> metadata_bytes(const gguf::File& file) {
  gguf::Writer writer(file.alignment());
  for (const auto& [key, value] : file.metadata()) writer.set_value(key, value);
  return writer.header();
}

// Sends `bytes` as the WEIGHTS chunks of tensor `name`.
void send_tensor(net::Connection& connection, const std::string& name,
                 std::span<const uint8_t> bytes, uint64_t& frame_id, uint64_t& done, uint64_t total,
                 const ShipProgress& progress) {
  uint64_t offset = 0;
  while (offset < bytes.size()) {
    const uint64_t n = std::min<uint64_t>(net::kWeightsChunkBytes, bytes.size() - offset);
    net::Weights w;
    w.tensor_name = name;
    w.offset = offset;
    w.total_size = bytes.size();
    w.data = bytes.subspan(offset, n);
    w.chunk_hash = net::chunk_hash(w.data);
    net::send_message(connection, ++frame_id, w);
    offset += n;
    done += n;
    if (progress) progress(done, total);
  }
}

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

ShipStats ship_weights(net::Connection& connection, const gguf::File& file, const Assignment& a,
                       const ShipProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint8_t> metadata = metadata_bytes(file);
  uint64_t total = metadata.size();
  for (const TensorDesc& t : a.tensors) total += file.tensor(t.name).n_bytes;
  uint64_t frame_id = 0, done = 0;
  send_tensor(connection, kMetadataName, metadata, frame_id, done, total, progress);
  for (const TensorDesc& t : a.tensors) {
    const gguf::TensorInfo& info = file.tensor(t.name);
    send_tensor(connection, t.name, info.bytes(), frame_id, done, total, progress);
    // The pages read for sending are not needed again (a stage this process runs maps them
    // back in on use): do not let shipping inflate the coordinator's memory.
    file.release(info);
  }
  ShipStats stats;
  stats.bytes = done;
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
