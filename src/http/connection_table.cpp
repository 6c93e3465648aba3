#include "http/connection_table.h"

#include <sys/socket.h>

namespace herd::http {

bool ConnectionTable::admit(Entry& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto full = full_scope(e.address); full; full = full_scope(e.address)) {
    Entry* victim = oldest_evictable(*full);
    if (!victim) {
      ++counts_.refused;
      return false;
    }
    evict(*victim);
  }
  e.serial = next_serial_++;
  e.evictable = true;
  e.evicted = false;
  e.admitted = true;
  open_[e.serial] = &e;
  ++per_address_[e.address];
  ++counts_.admitted;
  return true;
}

void ConnectionTable::set_evictable(Entry& e, bool evictable) {
  std::lock_guard<std::mutex> lock(mutex_);
  e.evictable = evictable;
}

void ConnectionTable::remove(Entry& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (e.admitted && !e.evicted) forget(e);
  e.admitted = false;
}

void ConnectionTable::shutdown_evictable() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [serial, e] : open_) {
    if (e->evictable) ::shutdown(e->fd, SHUT_RDWR);
  }
}

ConnectionTable::Counts ConnectionTable::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Counts c = counts_;
  c.open = static_cast<int64_t>(open_.size());
  return c;
}

int ConnectionTable::open_from(const std::string& address) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = per_address_.find(address);
  return it == per_address_.end() ? 0 : it->second;
}

std::optional<std::string> ConnectionTable::full_scope(const std::string& address) const {
  const auto it = per_address_.find(address);
  if (it != per_address_.end() && it->second >= caps_.max_per_address) return address;
  if (static_cast<int>(open_.size()) >= caps_.max_connections) return std::string();
  return std::nullopt;
}

ConnectionTable::Entry* ConnectionTable::oldest_evictable(const std::string& address) const {
  for (const auto& [serial, e] : open_) {
    if (e->evictable && (address.empty() || e->address == address)) return e;
  }
  return nullptr;
}

void ConnectionTable::evict(Entry& victim) {
  ::shutdown(victim.fd, SHUT_RDWR);
  victim.evicted = true;
  ++counts_.evicted;
  forget(victim);
}

void ConnectionTable::forget(Entry& e) {
  open_.erase(e.serial);
  const auto it = per_address_.find(e.address);
  if (it != per_address_.end() && --it->second <= 0) per_address_.erase(it);
}

}  // namespace herd::http
