// Payload buffers for received frames. Large buffers are recycled per connection: glibc
// serves allocations above 32 MiB with a fresh mmap, so without reuse every 64 MiB WEIGHTS
// chunk page-faults 16k new pages (measured: 1.1 GB/s on loopback instead of 2.2 GB/s).
// A buffer returns to its pool when the Frame holding it is destroyed, from any thread; if
// the pool is gone by then (the connection closed), it is simply freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace herd::net {

class PayloadPool;

struct PayloadDeleter {
  std::weak_ptr<PayloadPool> pool;  // empty: a plain heap buffer
  size_t capacity = 0;
  void operator()(uint8_t* data) const;
};

// Uninitialised bytes (no zeroing pass over large payloads), returned as the deleter says.
using PayloadStorage = std::unique_ptr<uint8_t[], PayloadDeleter>;

// A heap buffer of n uninitialised bytes, not pooled.
PayloadStorage allocate_payload(size_t n);

class PayloadPool : public std::enable_shared_from_this<PayloadPool> {
 public:
  // Buffers of at least kMinPooledBytes are kept for reuse, up to max_cached_bytes in all.
  static constexpr size_t kMinPooledBytes = size_t{1} << 20;

  static std::shared_ptr<PayloadPool> create(size_t max_cached_bytes);
  ~PayloadPool();

  // A buffer of at least n bytes: a cached one no larger than 2n (so a small frame does
  // not pin a large buffer), else a new one. Thread-safe.
  PayloadStorage allocate(size_t n);

 private:
  friend struct PayloadDeleter;
  explicit PayloadPool(size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  // Keeps the buffer if there is room, else frees it.
  void give_back(uint8_t* data, size_t capacity);

  struct Cached {
    uint8_t* data;
    size_t capacity;
  };
  const size_t max_cached_bytes_;
  std::mutex mutex_;
  std::vector<Cached> cached_;
  size_t cached_bytes_ = 0;
};

}  // namespace herd::net
