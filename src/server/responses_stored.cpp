#include "server/responses_stored.h"

#include <charconv>

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;

// An input item's id prefix by its type, as OpenAI's ids are (msg_, fc_, rs_ ...).
std::string id_prefix(const std::string& type) {
  if (type == "function_call") return "fc_";
  if (type == "function_call_output") return "fco_";
  if (type == "reasoning") return "rs_";
  return "msg_";
}

// The one value of query parameter `name`, or nothing; a repeated one is refused (which
// would it be?).
const std::string* query_value(const std::multimap<std::string, std::string>& params,
                               const std::string& name) {
  const auto [first, last] = params.equal_range(name);
  if (first == last) return nullptr;
  if (std::next(first) != last) {
    throw ApiError(400, "the query parameter '" + name + "' is given more than once",
                   "invalid_request_error", name);
  }
  return &first->second;
}

StoredResponse kept(const ResponseStore& store, const std::string& id) {
  std::optional<StoredResponse> stored = store.get(id);
  if (!stored) throw response_not_kept(id, "response_id", "response_not_found");
  return std::move(*stored);
}

}  // namespace

ApiError response_not_kept(const std::string& id, const std::string& param,
                           const std::string& code) {
  // Ids are short; a hostile one is cut so that the error stays small.
  const std::string shown = id.size() > 100 ? id.substr(0, 100) + "..." : id;
  return ApiError(404,
                  "the response '" + shown +
                      "' is not kept by this server (an unknown id, a response made with "
                      "store: false, one deleted or evicted for newer ones, or one from before "
                      "a restart)",
                  "invalid_request_error", param, code);
}

json input_items_with_ids(const json& items, const std::string& suffix) {
  json out = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    if (!item.is_object() || item.contains("id")) {
      out.push_back(item);
      continue;
    }
    const std::string type = item.value("type", std::string("message"));
    json with = {{"id", id_prefix(type) + suffix + "_in" + std::to_string(i)}, {"type", type}};
    for (const auto& [key, value] : item.items()) with[key] = value;
    out.push_back(std::move(with));
  }
  return out;
}

InputItemsQuery parse_input_items_query(const std::multimap<std::string, std::string>& params) {
  InputItemsQuery q;
  if (const std::string* order = query_value(params, "order")) {
    if (*order != "asc" && *order != "desc") {
      throw ApiError(400, "'order' must be 'asc' or 'desc'", "invalid_request_error", "order");
    }
    q.ascending = *order == "asc";
  }
  if (const std::string* limit = query_value(params, "limit")) {
    int n = 0;
    const char* end = limit->data() + limit->size();
    const auto [ptr, ec] = std::from_chars(limit->data(), end, n);
    if (limit->empty() || ec != std::errc() || ptr != end || n < 1 ||
        n > InputItemsQuery::kMaxLimit) {
      throw ApiError(400, "'limit' must be an integer from 1 to 100", "invalid_request_error",
                     "limit");
    }
    q.limit = n;
  }
  if (const std::string* after = query_value(params, "after")) q.after = *after;
  return q;
}

json input_items_page(const json& items, const InputItemsQuery& query) {
  const size_t n = items.size();
  // The i-th item in the query's order.
  auto at = [&](size_t i) -> const json& { return items[query.ascending ? i : n - 1 - i]; };
  size_t begin = 0;
  if (!query.after.empty()) {
    while (begin < n && !(at(begin).is_object() && at(begin).value("id", "") == query.after)) {
      ++begin;
    }
    if (begin == n) {
      throw ApiError(400, "'after' names no input item of this response", "invalid_request_error",
                     "after");
    }
    ++begin;
  }
  const size_t end = std::min(n, begin + static_cast<size_t>(query.limit));
  json data = json::array();
  for (size_t i = begin; i < end; ++i) data.push_back(at(i));
  auto id_of = [](const json& item) -> json {
    return item.is_object() && item.contains("id") ? item["id"] : json(nullptr);
  };
  return {{"object", "list"},
          {"data", data},
          {"first_id", data.empty() ? json(nullptr) : id_of(data.front())},
          {"last_id", data.empty() ? json(nullptr) : id_of(data.back())},
          {"has_more", end < n}};
}

json retrieve_response(const ResponseStore& store, const std::string& id) {
  return kept(store, id).response;
}

json delete_response(ResponseStore& store, const std::string& id) {
  if (!store.erase(id)) throw response_not_kept(id, "response_id", "response_not_found");
  return {{"id", id}, {"object", "response"}, {"deleted", true}};
}

json list_input_items(const ResponseStore& store, const std::string& id,
                      const std::multimap<std::string, std::string>& params) {
  // The query is read first: a bad one is 400 whether or not the id is kept.
  const InputItemsQuery query = parse_input_items_query(params);
  return input_items_page(kept(store, id).input, query);
}

}  // namespace herd::server
