#include "server/response_store.h"

namespace herd::server {

ResponseStore::ResponseStore(size_t max_responses, size_t max_bytes)
    : max_responses_(max_responses), max_bytes_(max_bytes) {}

void ResponseStore::put(const std::string& id, nlohmann::ordered_json items) {
  // The JSON text's size stands for the memory it holds (a value takes a few times more).
  const size_t n =
      items.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() + id.size();
  if (n > max_bytes_ || max_responses_ == 0) return;
  auto shared = std::make_shared<const nlohmann::ordered_json>(std::move(items));
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    // Ids are unique; a second put replaces the first (its place in the order kept).
    bytes_ -= it->second.bytes;
    it->second = {std::move(shared), n};
    bytes_ += n;
  } else {
    entries_.emplace(id, Entry{std::move(shared), n});
    order_.push_back(id);
    bytes_ += n;
  }
  while (!order_.empty() && (entries_.size() > max_responses_ || bytes_ > max_bytes_)) {
    evict_oldest();
  }
}

void ResponseStore::evict_oldest() {
  auto it = entries_.find(order_.front());
  order_.pop_front();
  if (it == entries_.end()) return;
  bytes_ -= it->second.bytes;
  entries_.erase(it);
}

std::optional<nlohmann::ordered_json> ResponseStore::get(const std::string& id) const {
  std::shared_ptr<const nlohmann::ordered_json> items;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    items = it->second.items;
  }
  return *items;  // copied outside the lock
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace herd::server
