// The responses that POST /v1/responses keeps (store: true) so that a later request can go on
// from one by its id (previous_response_id): each one's conversation as Responses items, its
// input's and its output's. Held in memory, bounded by count and by bytes; the oldest go
// first. A server restart forgets them all.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace herd::server {

class ResponseStore {
 public:
  static constexpr size_t kDefaultMaxResponses = 1024;
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  explicit ResponseStore(size_t max_responses = kDefaultMaxResponses,
                         size_t max_bytes = kDefaultMaxBytes);

  // Keeps `items` as the conversation of response `id`, evicting the oldest responses until
  // the bounds hold. A conversation larger than max_bytes alone is not kept.
  void put(const std::string& id, nlohmann::ordered_json items);
  // The conversation of response `id`, or nothing when it is unknown or was evicted.
  std::optional<nlohmann::ordered_json> get(const std::string& id) const;

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const nlohmann::ordered_json> items;
    size_t bytes = 0;
  };
  void evict_oldest();  // REQUIRES: mutex_ held, order_ not empty

  const size_t max_responses_, max_bytes_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace herd::server
