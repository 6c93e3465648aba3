// OpenAI's Responses API on the responses a ResponseStore keeps (store: true):
//   GET    /v1/responses/{id}              the response object, as its create call answered it
//   DELETE /v1/responses/{id}              {"id", "object": "response", "deleted": true}
//   GET    /v1/responses/{id}/input_items  a list object of the items it was given
// An id not kept (unknown, store: false, evicted, deleted, from before a restart) is 404
// (ApiError, OpenAI's shape). Each function answers the body, or throws ApiError; the HTTP
// server adds the auth check.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "server/request.h"
#include "server/response_store.h"

namespace herd::server {

// The 404 for a response id the store does not hold; `param` names where the id came from.
ApiError response_not_kept(const std::string& id, const std::string& param,
                           const std::string& code);

// The input items of a request, as kept: each with an "id" (its own, else one made from the
// response's id suffix and its place) and a "type" (an easy input message's is "message").
nlohmann::ordered_json input_items_with_ids(const nlohmann::ordered_json& items,
                                            const std::string& suffix);

// The query of GET .../input_items: `order` asc|desc (default desc, newest first, as
// OpenAI's), `limit` 1..100 (default 20), `after` (an item id: the items after it in that
// order). Other parameters (include) are ignored. Throws ApiError(400) naming the parameter.
struct InputItemsQuery {
  static constexpr int kDefaultLimit = 20;
  static constexpr int kMaxLimit = 100;
  bool ascending = false;
  int limit = kDefaultLimit;
  std::string after;  // empty: from the first
};
InputItemsQuery parse_input_items_query(const std::multimap<std::string, std::string>& params);

// A page of `items`: {"object": "list", "data", "first_id", "last_id", "has_more"}. Throws
// ApiError(400) when `after` names no item.
nlohmann::ordered_json input_items_page(const nlohmann::ordered_json& items,
                                        const InputItemsQuery& query);

nlohmann::ordered_json retrieve_response(const ResponseStore& store, const std::string& id);
nlohmann::ordered_json delete_response(ResponseStore& store, const std::string& id);
nlohmann::ordered_json list_input_items(const ResponseStore& store, const std::string& id,
                                        const std::multimap<std::string, std::string>& params);

}  // namespace herd::server
