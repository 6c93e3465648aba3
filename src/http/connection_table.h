// ConnectionTable: the connections a server holds, counted per client address, with the
// rule that keeps a slow client from filling them: when a newcomer would pass a cap, the
// oldest connection that has not finished sending its request's headers (a half-open one,
// or one idle between requests) is evicted first, and only when there is none is the
// newcomer refused.
//
//   ConnectionTable table({.max_connections = 256, .max_per_address = 32});
//   ConnectionTable::Entry e{fd, "203.0.113.9"};
//   if (!table.admit(e)) { ...answer 503, close...; }
//   table.set_evictable(e, false);  // its headers are in: a handler owns it now
//   ...
//   table.remove(e);                // before closing fd
//
// Eviction is shutdown(2) of the victim's socket (its thread's next read ends) and the
// victim leaves the counts at once, so the newcomer takes its place.
// Thread safety: every member is safe to call from any thread. An entry's fd stays valid
// until remove(): eviction happens under the table's lock, and remove() takes it, so an fd
// is never shut down after its owner closed it (and the number reused).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace herd::http {

struct ConnectionCaps {
  int max_connections = 256;  // all addresses together
  int max_per_address = 32;
};

class ConnectionTable {
 public:
  struct Entry {
    int fd = -1;
    std::string address;  // the client's IP address, as text
    // Set by the table:
    uint64_t serial = 0;  // order of admission: lower is older
    bool evictable = true;
    bool evicted = false;
    bool admitted = false;
  };
  struct Counts {
    int64_t open = 0, admitted = 0, evicted = 0, refused = 0;
  };

  explicit ConnectionTable(ConnectionCaps caps) : caps_(caps) {}

  // Counts `e` in, evicting as the header says; false: refused (nothing to evict).
  // REQUIRES: e outlives its remove().
  bool admit(Entry& e);
  // Whether `e` may be evicted (true while it waits for or reads a request's headers).
  void set_evictable(Entry& e, bool evictable);
  // Counts `e` out (a no-op for one evicted or refused). Call before closing its fd.
  void remove(Entry& e);
  // Shuts every evictable connection down (the server is stopping: those that have not sent
  // a whole request get none answered).
  void shutdown_evictable();

  Counts counts() const;
  int open_from(const std::string& address) const;

 private:
  // Whose connection a newcomer from `address` must displace: its address's (that address
  // is at its cap), anyone's ("": the total is) or none (nullopt). REQUIRES: mutex_ held.
  std::optional<std::string> full_scope(const std::string& address) const;
  // The oldest evictable entry, of `address` or of any address when it is empty.
  Entry* oldest_evictable(const std::string& address) const;
  void evict(Entry& victim);  // REQUIRES: mutex_ held
  void forget(Entry& e);      // REQUIRES: mutex_ held

  const ConnectionCaps caps_;
  mutable std::mutex mutex_;         // guards what follows
  std::map<uint64_t, Entry*> open_;  // by serial: oldest first
  std::unordered_map<std::string, int> per_address_;
  uint64_t next_serial_ = 1;
  Counts counts_;
};

}  // namespace herd::http
