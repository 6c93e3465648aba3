// The kept responses: the store's bounds and deletion, and GET/DELETE /v1/responses/{id} and
// its input_items listing over it, pages and hostile queries included.
#include "server/responses_stored.h"

#include <gtest/gtest.h>

namespace herd::server {
namespace {

using json = nlohmann::ordered_json;
using Params = std::multimap<std::string, std::string>;

StoredResponse response_with(const std::string& id, json input, json output = json::array()) {
  return {{{"id", id}, {"object", "response"}, {"output", std::move(output)}}, std::move(input)};
}

// The status, param and code of the ApiError `fn` throws (fails the test when none is).
template <typename Fn>
std::tuple<int, std::string, std::string> error_of(Fn fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    const nlohmann::json error = e.to_json()["error"];
    return {e.status(), error["param"].is_string() ? error["param"].get<std::string>() : "",
            error["code"].is_string() ? error["code"].get<std::string>() : ""};
  }
  ADD_FAILURE() << "no error";
  return {0, "", ""};
}

TEST(ResponseStore, KeepsWithinItsBoundsOldestOut) {
  ResponseStore store(2, 1000);
  store.put("a", response_with("a", json::array({"first"})));
  store.put("b", response_with("b", json::array({"second"})));
  EXPECT_EQ(store.get("a")->input, json::array({"first"}));
  store.put("c", response_with("c", json::array({"third"})));  // over the count: "a" goes
  EXPECT_FALSE(store.get("a"));
  EXPECT_EQ(store.get("b")->input, json::array({"second"}));
  EXPECT_EQ(store.size(), 2u);
  EXPECT_FALSE(store.get("nothing"));
  // Over the bytes: the oldest go until it fits; one larger than the bound is not kept.
  store.put("d", response_with("d", json::array({std::string(950, 'x')})));
  EXPECT_FALSE(store.get("b"));
  EXPECT_FALSE(store.get("c"));
  EXPECT_TRUE(store.get("d"));
  EXPECT_LE(store.bytes(), 1000u);
  store.put("e", response_with("e", json::array({std::string(2000, 'x')})));
  EXPECT_FALSE(store.get("e"));
  EXPECT_TRUE(store.get("d"));
  // The response object counts too.
  store.put("f", response_with("f", json::array(), json::array({std::string(2000, 'y')})));
  EXPECT_FALSE(store.get("f"));
}

TEST(ResponseStore, EraseForgetsAndFreesItsPlace) {
  ResponseStore store(2, 1 << 20);
  store.put("a", response_with("a", json::array({"first"})));
  EXPECT_GT(store.bytes(), 0u);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.get("a"));
  EXPECT_FALSE(store.erase("a"));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
  // Deleted ones leave no trace in the order: many creates and deletes, then two kept.
  for (int i = 0; i < 10000; ++i) {
    store.put("x", response_with("x", json::array()));
    store.erase("x");
  }
  store.put("b", response_with("b", json::array()));
  store.put("c", response_with("c", json::array()));
  EXPECT_TRUE(store.get("b"));
  EXPECT_TRUE(store.get("c"));
  store.put("d", response_with("d", json::array()));  // "b" is the oldest now
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.get("c"));
}

TEST(ResponseStore, ConversationIsInputThenOutput) {
  const StoredResponse r = response_with("r", json::array({"in1", "in2"}), json::array({"out"}));
  EXPECT_EQ(stored_conversation(r), json::array({"in1", "in2", "out"}));
}

TEST(ResponsesStored, RetrieveAndDeleteById) {
  ResponseStore store;
  store.put("resp_1", response_with("resp_1", json::array(), json::array({"out"})));
  EXPECT_EQ(retrieve_response(store, "resp_1"),
            json::parse(R"({"id": "resp_1", "object": "response", "output": ["out"]})"));
  EXPECT_EQ(delete_response(store, "resp_1"),
            json::parse(R"({"id": "resp_1", "object": "response", "deleted": true})"));
  const auto not_found =
      std::make_tuple(404, std::string("response_id"), std::string("response_not_found"));
  EXPECT_EQ(error_of([&] { retrieve_response(store, "resp_1"); }), not_found);
  EXPECT_EQ(error_of([&] { delete_response(store, "resp_1"); }), not_found);
  EXPECT_EQ(error_of([&] { list_input_items(store, "resp_1", {}); }), not_found);
  EXPECT_EQ(error_of([&] { retrieve_response(store, ""); }), not_found);
  // A hostile id's error stays small.
  try {
    retrieve_response(store, std::string(100000, 'z'));
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_LT(e.message().size(), 400u);
  }
}

TEST(ResponsesStored, InputItemsGetIdsAndTypes) {
  const json items = json::parse(R"([
      {"role": "user", "content": "hi"},
      {"type": "function_call_output", "call_id": "c1", "output": "3 C"},
      {"id": "msg_mine", "type": "message", "role": "user", "content": "again"}])");
  const json kept = input_items_with_ids(items, "abc");
  EXPECT_EQ(kept, json::parse(R"([
      {"id": "msg_abc_in0", "type": "message", "role": "user", "content": "hi"},
      {"id": "fco_abc_in1", "type": "function_call_output", "call_id": "c1", "output": "3 C"},
      {"id": "msg_mine", "type": "message", "role": "user", "content": "again"}])"));
}

// Keeps response "r" with input items i0 .. i(n-1), oldest first.
void put_with_items(ResponseStore& store, int n) {
  json input = json::array();
  for (int i = 0; i < n; ++i) input.push_back({{"id", std::string("i").append(std::to_string(i))}});
  store.put("r", response_with("r", std::move(input)));
}

std::vector<std::string> ids_of(const json& page) {
  std::vector<std::string> ids;
  for (const json& item : page["data"]) ids.push_back(item["id"]);
  return ids;
}

TEST(ResponsesStored, InputItemsPageNewestFirstByDefault) {
  ResponseStore store;
  put_with_items(store, 3);
  const json page = list_input_items(store, "r", {});
  EXPECT_EQ(page["object"], "list");
  EXPECT_EQ(ids_of(page), (std::vector<std::string>{"i2", "i1", "i0"}));
  EXPECT_EQ(page["first_id"], "i2");
  EXPECT_EQ(page["last_id"], "i0");
  EXPECT_EQ(page["has_more"], false);
  EXPECT_EQ(ids_of(list_input_items(store, "r", {{"order", "asc"}})),
            (std::vector<std::string>{"i0", "i1", "i2"}));
}

TEST(ResponsesStored, InputItemsPagesByLimitAndAfter) {
  ResponseStore store;
  put_with_items(store, 250);
  // The default limit is 20; the pages, followed by `after`, give every item once.
  EXPECT_EQ(list_input_items(store, "r", {})["data"].size(), 20u);
  std::vector<std::string> all;
  Params params = {{"order", "asc"}, {"limit", "100"}};
  for (int pages = 1;; ++pages) {
    const json page = list_input_items(store, "r", params);
    for (const std::string& id : ids_of(page)) all.push_back(id);
    if (!page["has_more"].get<bool>()) {
      EXPECT_EQ(pages, 3);
      break;
    }
    params.erase("after");
    params.emplace("after", page["last_id"].get<std::string>());
  }
  ASSERT_EQ(all.size(), 250u);
  for (int i = 0; i < 250; ++i) EXPECT_EQ(all[i], std::string("i").append(std::to_string(i)));
  // After the last item: an empty page with null ids.
  const json empty = list_input_items(store, "r", {{"after", "i0"}});
  EXPECT_TRUE(empty["data"].empty());
  EXPECT_TRUE(empty["first_id"].is_null());
  EXPECT_TRUE(empty["last_id"].is_null());
  EXPECT_EQ(empty["has_more"], false);
  EXPECT_EQ(ids_of(list_input_items(store, "r", {{"after", "i5"}, {"limit", "2"}})),
            (std::vector<std::string>{"i4", "i3"}));
  EXPECT_EQ(ids_of(list_input_items(store, "r", {{"limit", "1"}})),
            (std::vector<std::string>{"i249"}));
}

TEST(ResponsesStored, HostileQueriesAre400NamingTheParameter) {
  ResponseStore store;
  put_with_items(store, 3);
  const struct {
    Params params;
    const char* param;
  } cases[] = {
      {{{"limit", "0"}}, "limit"},
      {{{"limit", "101"}}, "limit"},
      {{{"limit", "-1"}}, "limit"},
      {{{"limit", ""}}, "limit"},
      {{{"limit", "abc"}}, "limit"},
      {{{"limit", "10abc"}}, "limit"},
      {{{"limit", "1e2"}}, "limit"},
      {{{"limit", " 5"}}, "limit"},
      {{{"limit", "99999999999999999999999"}}, "limit"},
      {{{"limit", "5"}, {"limit", "6"}}, "limit"},
      {{{"order", "sideways"}}, "order"},
      {{{"order", ""}}, "order"},
      {{{"order", "ASC"}}, "order"},
      {{{"after", "nothing"}}, "after"},
      {{{"after", ""}, {"after", "i1"}}, "after"},
  };
  for (const auto& c : cases) {
    const auto [status, param, code] = error_of([&] { list_input_items(store, "r", c.params); });
    EXPECT_EQ(status, 400) << c.param;
    EXPECT_EQ(param, c.param);
  }
  // A bad query is refused before the id is looked up.
  EXPECT_EQ(std::get<0>(error_of([&] { list_input_items(store, "gone", {{"limit", "0"}}); })), 400);
  // Unknown parameters are ignored; the bounds themselves are accepted.
  EXPECT_EQ(list_input_items(store, "r", {{"include", "x"}, {"limit", "100"}})["data"].size(), 3u);
  EXPECT_EQ(list_input_items(store, "r", {{"limit", "1"}})["data"].size(), 1u);
}

}  // namespace
}  // namespace herd::server
