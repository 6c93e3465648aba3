#include "hub/hub_server.h"

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "hub/ledger.h"
#include "hub/registration.h"
#include "hub/router.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The clock for registrations: each newer than the last, as the hub requires of an id's.
int64_t registration_ms() {
  static std::atomic<int64_t> last{0};
  int64_t now = unix_ms(), seen = last.load();
  while (!last.compare_exchange_weak(seen, std::max(now, seen + 1))) {
  }
  return std::max(now, seen + 1);
}

// A ledger in a new SQLite file.
struct Books {
  Books()
      : path([] {
          static int n = 0;
          const std::string p = ::testing::TempDir() + "/herd_hub_" + std::to_string(::getpid()) +
                                "_" + std::to_string(++n) + ".db";
          for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
          return p;
        }()),
        db(path),
        ledger(db) {}
  std::string path;
  SqliteDb db;
  Ledger ledger;
};

// A hub on a free loopback port, serving from its own thread.
struct RunningHub {
  explicit RunningHub(HubOptions o)
      : hub(
            [&] {
              o.host = "127.0.0.1";
              o.port = 0;
              o.allow_private_pods = true;  // the pods of these tests are on loopback
              return o;
            }(),
            books.ledger) {
    hub.bind();
    thread = std::thread([this] { hub.listen(); });
    client = std::make_unique<httplib::Client>("127.0.0.1", hub.port());
  }
  ~RunningHub() {
    hub.stop();
    thread.join();
  }
  Books books;
  HubServer hub;
  std::thread thread;
  std::unique_ptr<httplib::Client> client;
};

Registration sample(const net::NodeIdentity& identity, int32_t slots = 4) {
  Registration r;
  r.id = identity.id();
  r.name = "studio-pod";
  r.url = "http://10.0.0.5:8080";
  r.models = {{"llama-3.1-8b-q4_0", 8192}};
  r.slots = slots;
  r.decode_tokens_per_s = 31.5;
  r.prefill_tokens_per_s = 640;
  r.memory_bytes = uint64_t{64} << 30;
  r.time_ms = registration_ms();
  return r;
}

httplib::Result post_registration(httplib::Client& client, const std::string& body,
                                  const std::string& signature) {
  return client.Post("/api/register", httplib::Headers{{"X-Herd-Signature", signature}}, body,
                     "application/json");
}

TEST(HubServerTest, APodRegistersAndIsListed) {
  HubOptions o;
  o.api_keys = {"client-key"};
  RunningHub h(o);
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  std::string body = registration_body(sample(pod));
  httplib::Result res = post_registration(*h.client, body, sign_registration(pod, body));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["pod"], pod.id().to_text());
  EXPECT_EQ(json::parse(res->body)["heartbeat_seconds"], 10);

  // Clients need a key for the models; the network's view is public.
  res = h.client->Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = h.client->Get("/v1/models", httplib::Headers{{"Authorization", "Bearer client-key"}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const json models = json::parse(res->body);
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "llama-3.1-8b-q4_0");
  EXPECT_EQ(models["data"][0]["pods"], 1);
  res = h.client->Get("/api/network");
  ASSERT_TRUE(res);
  json network = json::parse(res->body);
  ASSERT_EQ(network["pods"].size(), 1u);
  EXPECT_EQ(network["pods"][0]["name"], "studio-pod");
  EXPECT_EQ(network["pods"][0]["url"], "http://10.0.0.5:8080");
  EXPECT_EQ(network["pods"][0]["slots"], 4);

  // Registering again is its heartbeat: the same pod, its new figures.
  body = registration_body(sample(pod, 8));
  res = post_registration(*h.client, body, sign_registration(pod, body));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  network = h.hub.network();
  ASSERT_EQ(network["pods"].size(), 1u);
  EXPECT_EQ(network["pods"][0]["slots"], 8);
}

TEST(HubServerTest, ForgedAndMalformedRegistrationsAreRefused) {
  RunningHub h(HubOptions{});
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  const net::NodeIdentity other = net::NodeIdentity::generate();
  const std::string body = registration_body(sample(pod));
  httplib::Result res = post_registration(*h.client, body, sign_registration(other, body));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_THAT(res->body, HasSubstr("the signature is not"));
  json bad = json::parse(body);
  bad["slots"] = 0;
  res = post_registration(*h.client, bad.dump(), sign_registration(pod, bad.dump()));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(res->body, HasSubstr("field 'slots'"));
  res = post_registration(*h.client, "not json", "x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_TRUE(h.hub.network()["pods"].empty());
}

TEST(HubServerTest, ASilentPodIsDropped) {
  HubOptions o;
  o.pod_timeout = std::chrono::seconds(1);
  RunningHub h(o);
  const net::NodeIdentity pod = net::NodeIdentity::generate();
  const std::string body = registration_body(sample(pod));
  httplib::Result res = post_registration(*h.client, body, sign_registration(pod, body));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(h.hub.network()["pods"].size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  h.hub.expire_silent_pods();
  EXPECT_TRUE(h.hub.network()["pods"].empty());
  res = h.client->Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_TRUE(json::parse(res->body)["data"].empty());
}

// A stand-in pod: answers completions with its name (streamed when asked), or fails with
// 500 when `broken`.
struct FakePod {
  FakePod(std::string name, bool broken) : name(std::move(name)), broken(broken) {
    const auto answer = [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      if (this->broken) {
        res.status = 500;
        res.set_content(R"({"error": {"message": "broken"}})", "application/json");
        return;
      }
      if (json::parse(req.body).value("stream", false)) {
        res.set_chunked_content_provider(
            "text/event-stream", [this](size_t, httplib::DataSink& sink) {
              for (int i = 0; i < 3; ++i) {
                const std::string event =
                    "data: {\"pod\": \"" + this->name + "\", \"i\": " + std::to_string(i) + "}\n\n";
                sink.write(event.data(), event.size());
              }
              sink.write("data: [DONE]\n\n", 14);
              sink.done();
              return true;
            });
        return;
      }
      res.set_content(json{{"pod", this->name}, {"path", req.path}}.dump(), "application/json");
    };
    server.Post("/v1/chat/completions", answer);
    server.Post("/v1/completions", answer);
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~FakePod() {
    server.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

  std::string name;
  bool broken;
  std::atomic<int> requests{0};
  httplib::Server server;
  int port = 0;
  std::thread thread;
};

void register_pod(RunningHub& h, const net::NodeIdentity& identity, const FakePod& pod,
                  double decode) {
  Registration r = sample(identity);
  r.name = pod.name;
  r.url = pod.url();
  r.decode_tokens_per_s = decode;
  const std::string body = registration_body(r);
  const httplib::Result res = post_registration(*h.client, body, sign_registration(identity, body));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
}

const httplib::Headers kClient = {{"Authorization", "Bearer client-key"}};

// A stand-in pod that can load a model: POST /api/load is answered 409 for the first load any
// pod of `loads` is asked for and 202 after; it keeps what it was shown. Completions: its name.
struct LoaderPod {
  LoaderPod(std::string name, std::atomic<int>& loads) : name(std::move(name)), loads(loads) {
    server.Post("/api/load", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mutex);
      authorization.push_back(req.get_header_value("Authorization"));
      models.push_back(json::parse(req.body).value("model", ""));
      res.status = this->loads.fetch_add(1) == 0 ? 409 : 202;
    });
    server.Post("/v1/completions", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"pod", this->name}}.dump(), "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~LoaderPod() {
    server.stop();
    thread.join();
  }
  // Registers serving `model`, able to load `loadable`: the hub's control token.
  std::string register_with(RunningHub& h, const std::string& model,
                            std::vector<std::string> loadable) {
    Registration r = sample(identity);
    r.name = name;
    r.url = "http://127.0.0.1:" + std::to_string(port);
    r.models = {{model, 4096}};
    r.loadable = std::move(loadable);
    const std::string body = registration_body(r);
    const httplib::Result res =
        post_registration(*h.client, body, sign_registration(identity, body));
    if (!res || res->status != 200) return "";
    return json::parse(res->body).value("control_token", "");
  }
  size_t asked() {
    std::lock_guard<std::mutex> lock(mutex);
    return models.size();
  }

  std::string name;
  std::atomic<int>& loads;
  net::NodeIdentity identity = net::NodeIdentity::generate();
  std::mutex mutex;
  std::vector<std::string> authorization, models;
  httplib::Server server;
  int port = 0;
  std::thread thread;
};

TEST(HubServerTest, AModelClientsWantIsLoadedOnAPodThatCan) {
  HubOptions o;
  o.api_keys = {"client-key"};
  o.demand.load_after = 2;
  RunningHub h(o);
  std::atomic<int> loads{0};
  LoaderPod x("x", loads), y("y", loads);
  const std::string token_x = x.register_with(h, "llama-3.1-8b-q4_0", {"qwen3-8b"});
  const std::string token_y = y.register_with(h, "llama-3.1-8b-q4_0", {"qwen3-8b", "other"});
  ASSERT_EQ(token_x.size(), 43u);
  ASSERT_EQ(token_y.size(), 43u);
  EXPECT_NE(token_x, token_y);
  EXPECT_EQ(x.register_with(h, "llama-3.1-8b-q4_0", {"qwen3-8b"}), token_x);  // kept
  const auto ask = [&](const std::string& model) {
    return h.client->Post("/v1/completions", kClient,
                          json{{"model", model}, {"prompt", "hi"}}.dump(), "application/json");
  };
  // Listed, marked, before anyone asks.
  httplib::Result res = h.client->Get("/v1/models", kClient);
  ASSERT_TRUE(res);
  const json listed = json::parse(res->body)["data"];
  ASSERT_EQ(listed.size(), 3u) << listed.dump();
  EXPECT_EQ(listed[1]["id"], "other");
  EXPECT_EQ(listed[2]["id"], "qwen3-8b");
  EXPECT_EQ(listed[2]["state"], "loadable");
  EXPECT_EQ(listed[2]["loadable_pods"], 2);
  EXPECT_EQ(listed[2]["pods"], 0);

  // No pod can load it: 404 as before.
  res = ask("nobody-has-it");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  // Below the threshold: 503, Retry-After, no pod asked.
  res = ask("qwen3-8b");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), std::to_string(kLoadRetryAfterSeconds));
  EXPECT_THAT(res->body, HasSubstr("(1 so far)"));
  EXPECT_EQ(x.asked() + y.asked(), 0u);
  // The threshold: a pod is asked, with its own token; it refuses (409).
  res = ask("qwen3-8b");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_THAT(res->body, HasSubstr("answered 409; another will be asked"));
  ASSERT_EQ(x.asked() + y.asked(), 1u);
  LoaderPod& first = x.asked() == 1 ? x : y;
  LoaderPod& second = x.asked() == 1 ? y : x;
  EXPECT_EQ(first.models[0], "qwen3-8b");
  EXPECT_EQ(first.authorization[0], "Bearer " + (&first == &x ? token_x : token_y));
  // The next request asks the other pod, which takes the load.
  res = ask("qwen3-8b");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_THAT(res->body, HasSubstr("is being loaded on a pod (" + second.name + ")"));
  ASSERT_EQ(second.asked(), 1u);
  EXPECT_EQ(second.authorization[0], "Bearer " + (&second == &x ? token_x : token_y));
  // While it loads: 503 + Retry-After, no other load; the network shows it.
  res = ask("qwen3-8b");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_FALSE(res->get_header_value("Retry-After").empty());
  EXPECT_THAT(res->body, HasSubstr("is being loaded on a pod"));
  EXPECT_EQ(x.asked() + y.asked(), 2u);
  json network = h.hub.network();
  ASSERT_EQ(network["loads"]["loads"].size(), 1u);
  EXPECT_EQ(network["loads"]["loads"][0]["model"], "qwen3-8b");
  for (const json& pod : network["pods"]) {
    EXPECT_EQ(pod["loading"], pod["name"] == second.name ? json("qwen3-8b") : json(nullptr));
  }
  res = h.client->Get("/v1/models", kClient);
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["data"][2]["state"], "loading");
  // Its model's requests go to the other pod meanwhile.
  res = ask("llama-3.1-8b-q4_0");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["pod"], first.name);
  // Loaded: it registers with the model, and gets its requests.
  second.register_with(h, "qwen3-8b", {"qwen3-8b", "llama-3.1-8b-q4_0"});
  res = ask("qwen3-8b");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["pod"], second.name);
  network = h.hub.network();
  EXPECT_TRUE(network["loads"]["loads"].empty());
}

TEST(HubServerTest, ARequestGoesToAPodAndIsTriedOnAnotherWhenItFails) {
  HubOptions o;
  o.api_keys = {"client-key"};
  RunningHub h(o);
  FakePod broken("broken", true), good("good", false);
  const net::NodeIdentity a = net::NodeIdentity::generate(), b = net::NodeIdentity::generate();
  register_pod(h, a, broken, 100);  // the fastest: chosen first, and it fails
  register_pod(h, b, good, 10);
  const std::string chat =
      R"({"model": "llama-3.1-8b-q4_0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})";
  httplib::Result res = h.client->Post("/v1/chat/completions", kClient, chat, "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["pod"], "good");
  EXPECT_EQ(json::parse(res->body)["path"], "/v1/chat/completions");
  EXPECT_EQ(res->get_header_value("X-Herd-Pod"), good.url());
  EXPECT_EQ(broken.requests, 1);
  // Streamed: passed on as the pod sends it, from the pod that works.
  json streamed = json::parse(chat);
  streamed["stream"] = true;
  res = h.client->Post("/v1/chat/completions", kClient, streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_THAT(res->body, HasSubstr(R"(data: {"pod": "good", "i": 2})"));
  EXPECT_THAT(res->body, HasSubstr("data: [DONE]"));
  // Both requests are over: no request counts as in flight.
  const json network = h.hub.network();  // kept: a loop over a temporary's member dangles
  for (const json& pod : network["pods"]) EXPECT_EQ(pod["active"], 0) << pod.dump();
  // Completions go the same way.
  res = h.client->Post("/v1/completions", kClient,
                       R"({"model": "llama-3.1-8b-q4_0", "prompt": "hi"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["path"], "/v1/completions");
}

TEST(HubServerTest, ClientsGetCleanErrors) {
  HubOptions o;
  o.api_keys = {"client-key"};
  RunningHub h(o);
  FakePod broken("broken", true);
  const net::NodeIdentity a = net::NodeIdentity::generate();
  register_pod(h, a, broken, 10);
  const std::string chat = R"({"model": "llama-3.1-8b-q4_0", "messages": []})";
  httplib::Result res = h.client->Post("/v1/chat/completions", chat, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = h.client->Post("/v1/chat/completions", kClient, R"({"messages": []})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(res->body, HasSubstr("field 'model'"));
  res =
      h.client->Post("/v1/chat/completions", kClient, R"({"model": "other"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_THAT(res->body, HasSubstr("model 'other' is not served by any pod"));
  // Every pod fails: 503 naming why; streamed, an error event and the end of the stream.
  res = h.client->Post("/v1/chat/completions", kClient, chat, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_THAT(res->body,
              HasSubstr("no pod could answer for model 'llama-3.1-8b-q4_0': it answered 500"));
  json streamed = json::parse(chat);
  streamed["stream"] = true;
  res = h.client->Post("/v1/chat/completions", kClient, streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_THAT(res->body, HasSubstr("no pod could answer"));
  EXPECT_THAT(res->body, HasSubstr("data: [DONE]"));
  EXPECT_EQ(broken.requests, 2);  // tried once each time: the only pod
}

// A stand-in pod that answers with usage and token ids, and checks others' tokens: it
// serves `token` every time, and finds a served token plausible when it is `token` (so
// pods agree when they serve the same one).
struct ModelPod {
  ModelPod(std::string name, int32_t token) : name(std::move(name)), token(token) {
    server.Post("/v1/chat/completions", [this](const httplib::Request& req,
                                               httplib::Response& res) {
      ++requests;
      const json body = json::parse(req.body);
      EXPECT_EQ(body.value("herd_token_ids", false), true);
      const int64_t n = body.value("max_tokens", 4);
      const json ids = std::vector<int32_t>(static_cast<size_t>(n), this->token);
      if (body.value("stream", false)) {
        // A chunk per token, then one with the finish reason, usage and ids, then [DONE].
        res.set_chunked_content_provider(
            "text/event-stream", [n, ids](size_t, httplib::DataSink& sink) {
              std::string events;
              for (int64_t i = 0; i < n; ++i) {
                events +=
                    "data: " + json{{"choices", {{{"delta", {{"content", "x"}}}}}}}.dump() + "\n\n";
              }
              const json last = {
                  {"choices", {{{"finish_reason", "length"}, {"delta", json::object()}}}},
                  {"usage", {{"prompt_tokens", 10}, {"completion_tokens", n}}},
                  {"herd", {{"completion_token_ids", ids}}}};
              events += "data: " + last.dump() + "\n\ndata: [DONE]\n\n";
              sink.write(events.data(), events.size());
              sink.done();
              return true;
            });
        return;
      }
      json answer = {{"choices", {{{"finish_reason", "length"}, {"message", {{"content", "x"}}}}}},
                     {"usage", {{"prompt_tokens", 10}, {"completion_tokens", n}}},
                     {"herd", {{"completion_token_ids", ids}}}};
      res.set_content(answer.dump(), "application/json");
    });
    server.Post("/api/verify", [this](const httplib::Request& req, httplib::Response& res) {
      ++checks;
      const json body = json::parse(req.body);
      EXPECT_FALSE(body["request"].contains("herd_token_ids"));
      json scores = json::array();
      for (const json& t : body["completion_token_ids"]) {
        const bool same = t.get<int32_t>() == this->token;
        scores.push_back({{"token", t}, {"probability", same ? 1.0 : 0.0}, {"gap", same ? 0 : 6}});
      }
      res.set_content(json{{"temperature", 0}, {"scores", scores}}.dump(), "application/json");
    });
    server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{}", "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
  }
  ~ModelPod() {
    server.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }

  std::string name;
  int32_t token;
  std::atomic<int> requests{0}, checks{0};
  httplib::Server server;
  int port = 0;
  std::thread thread;
};

json pod_named(const json& network, const std::string& name) {
  for (const json& p : network["pods"]) {
    if (p["name"] == name) return p;
  }
  return json();
}

// A seed the operator trusts (slow: the router prefers the others), two honest pods and a
// fast cheater: the cheater's first answer (a new pod's) is checked on the seed before the
// client gets it; it fails, the request goes to a trusted pod, and the cheater loses its
// reputation (the router sends it nothing more); the honest pod's first answers pass the
// seed's checks and are paid at once; the client pays every answer it got once; the ledger
// sums to zero.
TEST(HubServerTest, ACheaterIsCaughtAndTheBooksBalance) {
  HubOptions o;
  o.api_keys = {"client-key", "other-client"};
  o.operator_keys = {"operator-key"};
  o.secret = std::string(net::kKeySecretBytes, 's');
  o.grant_credits = 100000;
  o.check_rate = 0;  // only each pod's first kAlwaysChecked requests
  ModelPod seed("seed", 7), honest_a("honest-a", 7), honest_b("honest-b", 7), cheater("cheater", 9);
  const net::NodeIdentity a = net::NodeIdentity::generate(), b = net::NodeIdentity::generate(),
                          c = net::NodeIdentity::generate(), s = net::NodeIdentity::generate();
  o.trusted_pods = {s.id().to_text()};
  RunningHub h(o);
  auto enroll = [&](const net::NodeIdentity& id, const ModelPod& pod, double decode) {
    Registration r = sample(id);
    r.name = pod.name;
    r.url = pod.url();
    r.decode_tokens_per_s = decode;
    r.slots = 1;
    const std::string body = registration_body(r);
    const httplib::Result res = post_registration(*h.client, body, sign_registration(id, body));
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  };
  enroll(s, seed, 1);
  enroll(a, honest_a, 10);
  enroll(b, honest_b, 10);
  enroll(c, cheater, 1000);  // the fastest: chosen first
  const std::string chat =
      R"({"model": "llama-3.1-8b-q4_0", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})";
  int64_t paid = 0;
  for (int i = 0; i < 12; ++i) {
    const httplib::Result res =
        h.client->Post("/v1/chat/completions", kClient, chat, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->body.find("herd"), std::string::npos);  // the hub's part is taken out
    paid += 10 * 1 + 5 * 4;
    if (i == 0) {
      ASSERT_TRUE(h.hub.wait_checks(std::chrono::seconds(20)));
    }
  }
  ASSERT_TRUE(h.hub.wait_checks(std::chrono::seconds(20)));
  const json network = h.hub.network();
  const json caught = pod_named(network, "cheater");
  EXPECT_LT(caught["reputation"].get<double>(), kMinReputation);
  EXPECT_TRUE(caught["flagged"].get<bool>());
  EXPECT_EQ(caught["failed_verifications"], 1);
  // Its first answer was checked before the client got it, failed, and went to a trusted
  // pod instead: no answer of the cheater's reached the client, and it is avoided since.
  EXPECT_EQ(caught["requests"], 0);
  EXPECT_EQ(caught["credits_pending"], 0);
  EXPECT_EQ(caught["credits_earned"], 0);
  int64_t honest_requests = 0;
  for (const char* name : {"honest-a", "honest-b"}) {
    const json pod = pod_named(network, name);
    EXPECT_EQ(pod["failed_verifications"], 0) << name;
    EXPECT_FALSE(pod["flagged"].get<bool>()) << name;
    const int64_t requests = pod["requests"].get<int64_t>();
    honest_requests += requests;
    EXPECT_EQ(pod["verified"].get<int64_t>(), std::min(requests, kAlwaysChecked)) << name;
    // Checked requests are paid at once: 5 tokens x 4 x 90%.
    EXPECT_EQ(pod["credits_earned"].get<int64_t>(), 18 * pod["verified"].get<int64_t>()) << name;
  }
  // The cheater's request went to the seed (after a failed check, trusted pods first).
  EXPECT_EQ(honest_requests, 11);
  EXPECT_EQ(pod_named(network, "seed")["requests"], 1);
  EXPECT_TRUE(pod_named(network, "seed")["may_check"].get<bool>());
  EXPECT_EQ(network["hub"]["verification"]["failed"], 1);
  EXPECT_EQ(network["hub"]["requests"]["total"], 12);
  const json books = h.hub.ledger();
  EXPECT_TRUE(books["problems"].empty()) << books.dump();
  EXPECT_EQ(books["sum"], 0);
  const std::string account = Credits::client_account(o.secret, "client-key");
  EXPECT_EQ(books["balances"][account], 100000 - paid);
  EXPECT_EQ(books["balances"]["withheld"], 0);  // the cheater was never paid to begin with
  // The ledger over HTTP: the operator's; a client's own account its own, no other.
  const auto ledger_status = [&](const std::string& key, const std::string& query) {
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    const httplib::Result res = h.client->Get("/api/ledger" + query, headers);
    return res ? res->status : -1;
  };
  const std::string other = Credits::client_account(o.secret, "other-client");
  EXPECT_EQ(ledger_status("", ""), 401);
  EXPECT_EQ(ledger_status("", "?account=" + account), 401);
  EXPECT_EQ(ledger_status("client-key", ""), 403);
  EXPECT_EQ(ledger_status("other-client", "?account=" + account), 403);
  EXPECT_EQ(ledger_status("client-key", "?account=" + other), 403);
  EXPECT_EQ(ledger_status("client-key", "?account=fee"), 403);
  EXPECT_EQ(ledger_status("operator-key", ""), 200);
  EXPECT_EQ(ledger_status("operator-key", "?account=" + other), 200);
  // The audit trail of the client's account, by its own key: its grant, then one charge per
  // answer.
  const httplib::Result audit = h.client->Get("/api/ledger?account=" + account, kClient);
  ASSERT_TRUE(audit);
  ASSERT_EQ(audit->status, 200) << audit->body;
  const json history = json::parse(audit->body)["history"];
  ASSERT_EQ(history.size(), 13u) << audit->body;
  EXPECT_EQ(history[0]["amount"], 100000);
  for (size_t i = 1; i < history.size(); ++i) {
    EXPECT_EQ(history[i]["amount"], -30) << history[i].dump();
    EXPECT_EQ(history[i]["transfer"].get<std::string>().rfind("request:", 0), 0u);
  }
  EXPECT_EQ(history.back()["balance_after"], 100000 - paid);
}

// A streamed answer's finish reason reaches the client only after the charge is in the books:
// a replica killed between the two leaves an answer cut (and perhaps paid), never one the
// client holds whole and nobody paid for (docs/network.md, "Replicas").
TEST(HubServerTest, AStreamedAnswerFinishesOnlyOnceCharged) {
  // Trusted: the stream is passed on as it comes. Untrusted (no pod may check it, so it is
  // served unchecked): held until the pod's answer is whole, then passed on.
  for (const bool trusted : {true, false}) {
    SCOPED_TRACE(trusted ? "trusted pod" : "untrusted pod");
    HubOptions o;
    o.api_keys = {"client-key"};
    o.secret = std::string(net::kKeySecretBytes, 's');
    o.grant_credits = 100000;
    ModelPod pod("pod", 7);
    const net::NodeIdentity id = net::NodeIdentity::generate();
    if (trusted) o.trusted_pods = {id.id().to_text()};
    RunningHub h(o);
    Registration r = sample(id);
    r.url = pod.url();
    const std::string body = registration_body(r);
    ASSERT_EQ(post_registration(*h.client, body, sign_registration(id, body))->status, 200);
    const std::string account = Credits::client_account(o.secret, "client-key");
    std::string received;
    size_t charges_at_finish = 0;
    bool finish_seen = false;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.headers = kClient;
    req.body = R"({"model": "llama-3.1-8b-q4_0", "messages": [], "max_tokens": 6, "stream": true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      received.append(data, n);
      if (!finish_seen && received.find("finish_reason") != std::string::npos) {
        finish_seen = true;
        charges_at_finish = h.books.ledger.history(account).size() - 1;  // less the grant
      }
      return true;
    };
    const httplib::Result res = h.client->send(req);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    ASSERT_TRUE(finish_seen) << received;
    EXPECT_EQ(charges_at_finish, 1u);
    EXPECT_THAT(received, HasSubstr(R"({"content":"x"})"));  // the tokens before the finish
    EXPECT_THAT(received, HasSubstr("data: [DONE]"));
    EXPECT_EQ(received.find("completion_token_ids"), std::string::npos);  // herd's, not theirs
  }
}

// A client whose credits do not cover a request's most is refused before any pod works.
TEST(HubServerTest, ARequestBeyondTheKeysCreditsIsRefused) {
  HubOptions o;
  o.api_keys = {"client-key"};
  o.grant_credits = 100;
  RunningHub h(o);
  ModelPod pod("pod", 7);
  const net::NodeIdentity id = net::NodeIdentity::generate();
  Registration r = sample(id);
  r.url = pod.url();
  const std::string body = registration_body(r);
  ASSERT_EQ(post_registration(*h.client, body, sign_registration(id, body))->status, 200);
  const httplib::Result res = h.client->Post(
      "/v1/chat/completions", kClient,
      R"({"model": "llama-3.1-8b-q4_0", "messages": [], "max_tokens": 1000})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 402);
  EXPECT_THAT(res->body, HasSubstr("lower max_tokens"));
  EXPECT_EQ(pod.requests, 0);
}

}  // namespace
}  // namespace herd::hub
