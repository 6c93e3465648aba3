#include "hub/hub_server.h"

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "hub/registration.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A hub on a free loopback port, serving from its own thread.
struct RunningHub {
  explicit RunningHub(HubOptions o)
      : hub([&] {
          o.host = "127.0.0.1";
          o.port = 0;
          return o;
        }()) {
    hub.bind();
    thread = std::thread([this] { hub.listen(); });
    client = std::make_unique<httplib::Client>("127.0.0.1", hub.port());
  }
  ~RunningHub() {
    hub.stop();
    thread.join();
  }
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
  r.time_ms = unix_ms();
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

}  // namespace
}  // namespace herd::hub
