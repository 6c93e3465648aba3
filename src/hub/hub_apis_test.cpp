// The hub routes Anthropic's Messages, OpenAI's Responses and Ollama's APIs as it routes
// OpenAI's (client_api.h): stand-in pods answer each in its own shape, the hub bills from
// that API's usage, strips herd's extension, answers errors in the API's shape, and has the
// answers checked under the API's /api/verify endpoint name.
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "hub/credits.h"
#include "hub/hub_server.h"
#include "hub/ledger.h"
#include "hub/registration.h"
#include "hub/sqlite_db.h"
#include "net/api_keys.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

const std::string kModel = "llama-3.1-8b-q4_0";

// Each API's answer: "hi there" of 2 tokens (ids 5, 6) after 7 prompt tokens.
json whole_answer(const std::string& path) {
  const json herd = {{"completion_token_ids", {5, 6}}};
  if (path == "/v1/messages") {
    return {{"type", "message"},
            {"content", {{{"type", "text"}, {"text", "hi there"}}}},
            {"stop_reason", "end_turn"},
            {"usage", {{"input_tokens", 7}, {"output_tokens", 2}}},
            {"herd", herd}};
  }
  if (path == "/v1/responses") {
    return {
        {"object", "response"},
        {"status", "completed"},
        {"output",
         {{{"type", "message"}, {"content", {{{"type", "output_text"}, {"text", "hi there"}}}}}}},
        {"usage", {{"input_tokens", 7}, {"output_tokens", 2}}},
        {"herd", herd}};
  }
  json out = {{"model", kModel},
              {"done", true},
              {"prompt_eval_count", 7},
              {"eval_count", 2},
              {"herd", herd}};
  if (path == "/api/chat") {
    out["message"] = {{"role", "assistant"}, {"content", "hi there"}};
  } else {
    out["response"] = "hi there";
  }
  return out;
}

std::string sse(const json& event) {
  return "event: " + event.value("type", std::string()) + "\ndata: " + event.dump() + "\n\n";
}

std::string streamed_answer(const std::string& path) {
  const json herd = {{"completion_token_ids", {5, 6}}};
  if (path == "/v1/messages") {
    return sse({{"type", "message_start"},
                {"message", {{"usage", {{"input_tokens", 7}, {"output_tokens", 0}}}}}}) +
           sse({{"type", "content_block_delta"},
                {"delta", {{"type", "text_delta"}, {"text", "hi there"}}}}) +
           sse({{"type", "message_delta"},
                {"delta", {{"stop_reason", "end_turn"}}},
                {"usage", {{"output_tokens", 2}}},
                {"herd", herd}}) +
           sse({{"type", "message_stop"}});
  }
  if (path == "/v1/responses") {
    json response = whole_answer(path);
    response.erase("herd");
    response["herd"] = herd;
    return sse({{"type", "response.output_text.delta"}, {"delta", "hi there"}}) +
           sse({{"type", "response.completed"}, {"response", response}});
  }
  json first = whole_answer(path), last = whole_answer(path);
  first.erase("herd");
  first.erase("prompt_eval_count");
  first.erase("eval_count");
  first["done"] = false;
  if (path == "/api/chat") {
    last["message"]["content"] = "";
  } else {
    last["response"] = "";
  }
  return first.dump() + "\n" + last.dump() + "\n";
}

// A stand-in pod serving the four APIs (or failing them all, `broken`), and checking others'
// tokens: ids 5 and 6 are what it would serve. It keeps the last request and check it got.
struct ApiPod {
  explicit ApiPod(bool broken = false) : broken(broken) {
    for (const char* path : {"/v1/messages", "/v1/responses", "/api/chat", "/api/generate"}) {
      server.Post(path, [this, path = std::string(path)](const httplib::Request& req,
                                                         httplib::Response& res) {
        ++requests;
        {
          std::lock_guard<std::mutex> lock(mutex);
          last_request = json::parse(req.body);
        }
        if (this->broken) {
          res.status = 500;
          res.set_content(R"({"error": "broken"})", "application/json");
          return;
        }
        const json body = json::parse(req.body);
        const bool ollama = path.rfind("/api/", 0) == 0;
        if (!body.value("stream", ollama)) {
          res.set_content(whole_answer(path).dump(), "application/json");
          return;
        }
        const std::string events = streamed_answer(path);
        res.set_chunked_content_provider(ollama ? "application/x-ndjson" : "text/event-stream",
                                         [events](size_t, httplib::DataSink& sink) {
                                           // A byte at a time: the hub's readers take events
                                           // however they are cut.
                                           for (char c : events) sink.write(&c, 1);
                                           sink.done();
                                           return true;
                                         });
      });
    }
    server.Post("/api/verify", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      {
        std::lock_guard<std::mutex> lock(mutex);
        last_check = body;
      }
      json scores = json::array();
      for (const json& t : body["completion_token_ids"]) {
        scores.push_back({{"token", t}, {"probability", 1.0}, {"gap", 0}});
      }
      res.set_content(json{{"temperature", 0}, {"scores", scores}, {"content", "hi there"}}.dump(),
                      "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~ApiPod() {
    server.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  json request() {
    std::lock_guard<std::mutex> lock(mutex);
    return last_request;
  }
  json check() {
    std::lock_guard<std::mutex> lock(mutex);
    return last_check;
  }

  bool broken;
  std::atomic<int> requests{0};
  std::mutex mutex;
  json last_request, last_check;
  httplib::Server server;
  int port = 0;
  std::thread thread;
};

// A hub with one client key, on a free loopback port, and a ledger in a new SQLite file.
struct Hub {
  explicit Hub(std::vector<std::string> trusted = {})
      : path(::testing::TempDir() + "/herd_hub_apis_" + std::to_string(::getpid()) + "_" +
             std::to_string(++count) + ".db"),
        db((remove_files(path), path)),
        ledger(db),
        hub(
            [&] {
              HubOptions o;
              o.host = "127.0.0.1";
              o.port = 0;
              o.allow_private_pods = true;
              o.api_keys = {"client-key"};
              o.secret = std::string(net::kKeySecretBytes, 's');
              o.grant_credits = 100000;
              o.trusted_pods = std::move(trusted);
              o.check_rate = 1;  // every answer (not only a new pod's first ones)
              return o;
            }(),
            ledger),
        account(Credits::client_account(std::string(net::kKeySecretBytes, 's'), "client-key")) {
    hub.bind();
    thread = std::thread([this] { hub.listen(); });
    client = std::make_unique<httplib::Client>("127.0.0.1", hub.port());
  }
  ~Hub() {
    hub.stop();
    thread.join();
  }
  static void remove_files(const std::string& p) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
  }
  void add(const net::NodeIdentity& id, const ApiPod& pod, double decode = 30) {
    Registration r;
    r.id = id.id();
    r.name = "pod-" + std::to_string(pod.port);
    r.url = pod.url();
    r.models = {{kModel, 8192}};
    r.slots = 4;
    r.decode_tokens_per_s = decode;
    r.prefill_tokens_per_s = 640;
    r.memory_bytes = uint64_t{64} << 30;
    r.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
    const std::string body = registration_body(r);
    const httplib::Result res = client->Post(
        "/api/register", httplib::Headers{{"X-Herd-Signature", sign_registration(id, body)}}, body,
        "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  int64_t balance() { return hub.ledger()["balances"][account].get<int64_t>(); }

  static inline int count = 0;
  std::string path;
  SqliteDb db;
  Ledger ledger;
  HubServer hub;
  std::string account;
  std::thread thread;
  std::unique_ptr<httplib::Client> client;
};

const httplib::Headers kBearer = {{"Authorization", "Bearer client-key"}};

// A request of each API, `stream` as given.
json request_of(const std::string& path, bool stream) {
  json body = {{"model", kModel}, {"stream", stream}};
  if (path == "/v1/messages") {
    body["max_tokens"] = 16;
    body["messages"] = {{{"role", "user"}, {"content", "hi"}}};
  } else if (path == "/v1/responses") {
    body["max_output_tokens"] = 16;
    body["input"] = "hi";
  } else if (path == "/api/chat") {
    body["options"] = {{"num_predict", 16}};
    body["messages"] = {{{"role", "user"}, {"content", "hi"}}};
  } else {
    body["options"] = {{"num_predict", 16}};
    body["prompt"] = "hi";
  }
  return body;
}

const char* const kPaths[] = {"/v1/messages", "/v1/responses", "/api/chat", "/api/generate"};

TEST(HubApisTest, EachApiIsRoutedBilledFromItsUsageAndLosesHerdsExtension) {
  Hub h;
  ApiPod pod;
  h.add(net::NodeIdentity::generate(), pod);
  const int64_t price = price_of(Prices{}, 7, 2).client_pays;
  for (const char* path : kPaths) {
    for (const bool stream : {false, true}) {
      SCOPED_TRACE(std::string(path) + (stream ? " streamed" : " whole"));
      const int64_t before = h.balance();
      // Anthropic's clients send their key as x-api-key.
      const httplib::Headers auth = std::string(path) == "/v1/messages"
                                        ? httplib::Headers{{"x-api-key", "client-key"}}
                                        : kBearer;
      const httplib::Result res =
          h.client->Post(path, auth, request_of(path, stream).dump(), "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
      EXPECT_THAT(res->body, HasSubstr("hi there"));
      EXPECT_EQ(res->body.find("herd"), std::string::npos) << res->body;
      if (stream) {
        EXPECT_EQ(res->get_header_value("Content-Type"), std::string(path).rfind("/api/", 0) == 0
                                                             ? "application/x-ndjson"
                                                             : "text/event-stream");
      }
      const json forwarded = pod.request();
      EXPECT_EQ(forwarded["herd_token_ids"], true);
      EXPECT_FALSE(forwarded.contains("stream_options"));  // OpenAI's only
      EXPECT_EQ(h.balance(), before - price);              // 7 prompt and 2 answer tokens
    }
  }
  // Ollama streams unless told not to; its clients may name the model "name:latest".
  json body = request_of("/api/chat", false);
  body.erase("stream");
  body["model"] = kModel + ":latest";
  const httplib::Result res = h.client->Post("/api/chat", kBearer, body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/x-ndjson");
  EXPECT_THAT(res->body, HasSubstr("\"done\":false"));
}

TEST(HubApisTest, ErrorsComeInEachApisShape) {
  Hub h;
  ApiPod broken(true);
  h.add(net::NodeIdentity::generate(), broken);
  // No key.
  httplib::Result res =
      h.client->Post("/v1/messages", request_of("/v1/messages", false).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  json error = json::parse(res->body);
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["error"]["type"], "authentication_error");
  res = h.client->Post("/api/chat", request_of("/api/chat", false).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_TRUE(json::parse(res->body)["error"].is_string()) << res->body;
  res = h.client->Post("/v1/responses", request_of("/v1/responses", false).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "authentication_error");
  // Another model: 404 in Anthropic's and Ollama's shapes.
  json other = request_of("/v1/messages", false);
  other["model"] = "other";
  res = h.client->Post("/v1/messages", kBearer, other.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "not_found_error");
  other = request_of("/api/generate", false);
  other["model"] = "other";
  res = h.client->Post("/api/generate", kBearer, other.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_THAT(json::parse(res->body)["error"].get<std::string>(), HasSubstr("model 'other'"));
  // A stored response lives on one pod: refused before any pod is asked.
  json continued = request_of("/v1/responses", false);
  continued["previous_response_id"] = "resp_1";
  res = h.client->Post("/v1/responses", kBearer, continued.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(json::parse(res->body)["error"]["message"].get<std::string>(),
              HasSubstr("previous_response_id"));
  EXPECT_EQ(broken.requests, 0);
  // Every pod fails: 503, whole or streamed, in the API's shape.
  res = h.client->Post("/v1/messages", kBearer, request_of("/v1/messages", false).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "overloaded_error");
  res = h.client->Post("/v1/messages", kBearer, request_of("/v1/messages", true).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("event: error\ndata: {"));
  EXPECT_THAT(res->body, HasSubstr("no pod could answer"));
  res = h.client->Post("/v1/responses", kBearer, request_of("/v1/responses", true).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("event: error\ndata: {"));
  res = h.client->Post("/api/chat", kBearer, request_of("/api/chat", true).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  ASSERT_FALSE(res->body.empty());
  EXPECT_EQ(res->body.back(), '\n');
  EXPECT_THAT(json::parse(res->body)["error"].get<std::string>(), HasSubstr("no pod could answer"));
  res = h.client->Post("/api/generate", kBearer, request_of("/api/generate", false).dump(),
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_TRUE(json::parse(res->body)["error"].is_string());
}

// A new pod's answers are checked before they are sent, on a trusted pod, under the name
// its API has at /api/verify, with the request as the client sent it.
TEST(HubApisTest, AnswersAreCheckedUnderTheirApisEndpoint) {
  const net::NodeIdentity checker_id = net::NodeIdentity::generate();
  Hub h({checker_id.id().to_text()});
  ApiPod checker, server;
  h.add(checker_id, checker, 1);  // slow: the router prefers the other
  h.add(net::NodeIdentity::generate(), server, 100);
  const std::pair<const char*, const char*> names[] = {{"/v1/messages", "messages"},
                                                       {"/v1/responses", "responses"},
                                                       {"/api/chat", "ollama_chat"},
                                                       {"/api/generate", "ollama_generate"}};
  for (const auto& [path, endpoint] : names) {
    SCOPED_TRACE(path);
    const json body = request_of(path, false);
    const httplib::Result res = h.client->Post(path, kBearer, body.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    ASSERT_TRUE(h.hub.wait_checks(std::chrono::seconds(10)));
    const json check = checker.check();
    ASSERT_TRUE(check.is_object()) << "no check came";
    EXPECT_EQ(check["endpoint"], endpoint);
    EXPECT_EQ(check["completion_token_ids"], json({5, 6}));
    json sent = body;
    sent.erase("stream");
    EXPECT_EQ(check["request"], sent);
  }
}

}  // namespace
}  // namespace herd::hub
