#include "server/response_store.h"

#include <algorithm>

namespace herd::server {
namespace {

size_t json_bytes(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
}

}  // namespace

ResponseStore::ResponseStore(size_t max_responses, size_t max_bytes)
    : max_responses_(max_responses), max_bytes_(max_bytes) {}

void ResponseStore::put(const std::string& id, StoredResponse stored) {
  // The JSON text's size stands for the memory it holds (a value takes a few times more).
  const size_t n = json_bytes(stored.response) + json_bytes(stored.input) + id.size();
  if (n > max_bytes_ || max_responses_ == 0) return;
  auto shared = std::make_shared<const StoredResponse>(std::move(stored));
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

std::optional<StoredResponse> ResponseStore::get(const std::string& id) const {
  std::shared_ptr<const StoredResponse> stored;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    stored = it->second.stored;
  }
  return *stored;  // copied outside the lock
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  // Linear in the kept responses (at most max_responses_); leaving the id in order_ instead
  // would let create-then-delete grow it without bound.
  order_.erase(std::find(order_.begin(), order_.end(), id));
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

nlohmann::ordered_json stored_conversation(const StoredResponse& stored) {
  nlohmann::ordered_json items = stored.input;
  if (const auto it = stored.response.find("output");
      it != stored.response.end() && it->is_array()) {
    for (const auto& item : *it) items.push_back(item);
  }
  return items;
}

}  // namespace herd::server
