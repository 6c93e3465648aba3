// The responses that POST /v1/responses keeps (store: true): each one's response object as its
// create call answered it and the input items it was given, so that a later request can go on
// from one by its id (previous_response_id) and GET/DELETE /v1/responses/{id} can read and
// remove it (responses_stored.h). Held in memory, bounded by count and by bytes; the oldest
// go first. A server restart forgets them all. Thread-safe.
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

struct StoredResponse {
  nlohmann::ordered_json response;  // the response object, as its create call answered it
  // The items it was given: the conversation before it (previous_response_id's input and
  // output items), then its request's input. The conversation after it is `input` then
  // response["output"].
  nlohmann::ordered_json input = nlohmann::ordered_json::array();
};

class ResponseStore {
 public:
  static constexpr size_t kDefaultMaxResponses = 1024;
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  explicit ResponseStore(size_t max_responses = kDefaultMaxResponses,
                         size_t max_bytes = kDefaultMaxBytes);

  // Keeps `stored` as response `id`, evicting the oldest responses until the bounds hold. A
  // response larger than max_bytes alone is not kept.
  void put(const std::string& id, StoredResponse stored);
  // Response `id`, or nothing when it is unknown, was evicted or deleted.
  std::optional<StoredResponse> get(const std::string& id) const;
  // Forgets response `id`; false when it was not kept.
  bool erase(const std::string& id);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> stored;
    size_t bytes = 0;
  };
  void evict_oldest();  // REQUIRES: mutex_ held, order_ not empty

  const size_t max_responses_, max_bytes_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first; exactly the ids of entries_
  size_t bytes_ = 0;
};

// The conversation after a stored response: its input items, then its output items.
nlohmann::ordered_json stored_conversation(const StoredResponse& stored);

}  // namespace herd::server
