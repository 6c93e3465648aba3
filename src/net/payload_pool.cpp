#include "net/payload_pool.h"

namespace herd::net {

void PayloadDeleter::operator()(uint8_t* data) const {
  if (data == nullptr) return;
  if (std::shared_ptr<PayloadPool> owner = pool.lock()) {
    owner->give_back(data, capacity);
  } else {
    delete[] data;
  }
}

PayloadStorage allocate_payload(size_t n) {
  return PayloadStorage(new uint8_t[n], PayloadDeleter{{}, n});  // default-initialised: no zeroing
}

std::shared_ptr<PayloadPool> PayloadPool::create(size_t max_cached_bytes) {
  return std::shared_ptr<PayloadPool>(new PayloadPool(max_cached_bytes));
}

PayloadPool::~PayloadPool() {
  for (const Cached& c : cached_) delete[] c.data;
}

PayloadStorage PayloadPool::allocate(size_t n) {
  if (n < kMinPooledBytes) return allocate_payload(n);
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < cached_.size(); ++i) {
      if (cached_[i].capacity >= n && cached_[i].capacity / 2 <= n) {
        Cached c = cached_[i];
        cached_.erase(cached_.begin() + static_cast<long>(i));
        cached_bytes_ -= c.capacity;
        return PayloadStorage(c.data, PayloadDeleter{weak_from_this(), c.capacity});
      }
    }
  }
  return PayloadStorage(new uint8_t[n], PayloadDeleter{weak_from_this(), n});
}

void PayloadPool::give_back(uint8_t* data, size_t capacity) {
  {
    std::lock_guard lock(mutex_);
    if (cached_bytes_ + capacity <= max_cached_bytes_) {
      cached_.push_back(Cached{data, capacity});
      cached_bytes_ += capacity;
      return;
    }
  }
  delete[] data;
}

}  // namespace herd::net
