#include "hub/registrar.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "hub/ledger.h"
#include "hub/pod_clients.h"
#include "hub/registration.h"
#include "hub/sqlite_db.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A registrar over its own pod table, loads and books (a new SQLite file).
struct Hub {
  explicit Hub(RegistrarOptions o)
      : path([] {
          static int n = 0;
          const std::string p = ::testing::TempDir() + "/herd_registrar_" +
                                std::to_string(::getpid()) + "_" + std::to_string(++n) + ".db";
          for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p + suffix);
          return p;
        }()),
        db(path),
        ledger(db),
        credits(ledger, Prices{}),
        clients(""),
        loads(DemandOptions{}, pods, clients),
        registrar(o, pods, loads, credits) {}

  // Signs and registers `r` from `from`.
  Registrar::Answer post(const net::NodeIdentity& identity, const Registration& r,
                         const std::string& from = "203.0.113.1") {
    const std::string body = registration_body(r);
    return registrar.register_pod(body, sign_registration(identity, body), from, unix_ms());
  }

  std::string path;
  SqliteDb db;
  Ledger ledger;
  Credits credits;
  PodTable pods;
  PodClients clients;
  Loads loads;
  Registrar registrar;
};

Registration pod(const net::NodeIdentity& identity, const std::string& url,
                 int64_t time_ms = unix_ms()) {
  Registration r;
  r.id = identity.id();
  r.name = "pod";
  r.url = url;
  r.models = {{"m", 4096}};
  r.slots = 1;
  r.decode_tokens_per_s = 10;
  r.prefill_tokens_per_s = 100;
  r.time_ms = time_ms;
  return r;
}

RegistrarOptions options(bool allow_private = false, double per_minute = 0) {
  RegistrarOptions o;
  o.allow_private_pods = allow_private;
  o.new_pods_per_minute = per_minute;
  return o;
}

TEST(RegistrarTest, APortBeyondRangeIsRefusedNamingIt) {
  Hub hub(options(true));
  const auto identity = net::NodeIdentity::generate();
  const auto a = hub.post(identity, pod(identity, "http://127.0.0.1:99999999999"));
  EXPECT_EQ(a.status, 400);
  EXPECT_THAT(a.message, HasSubstr("port '99999999999' is not in 1..65535"));
  EXPECT_EQ(hub.pods.size(), 0u);
}

TEST(RegistrarTest, NonPublicAddressesAreRefusedUnlessAllowed) {
  Hub strict(options(false));
  for (const char* url :
       {"http://127.0.0.1:8080", "http://localhost:8080", "http://10.0.0.5:8080",
        "http://169.254.169.254", "http://192.168.1.1:1", "http://172.16.0.1:1",
        "http://100.64.0.1:1", "http://0.0.0.0:1", "http://[::1]:8080", "http://[fe80::1]:1",
        "http://[fc00::1]:1", "http://[::ffff:127.0.0.1]:1", "http://2130706433:8080"}) {
    const auto identity = net::NodeIdentity::generate();
    const auto a = strict.post(identity, pod(identity, url));
    EXPECT_EQ(a.status, 403) << url << ": " << a.message;
    EXPECT_THAT(a.message, HasSubstr("not a public address")) << url;
  }
  EXPECT_EQ(strict.pods.size(), 0u);
  // A public address literal needs no lookup and is pinned as it is.
  const auto identity = net::NodeIdentity::generate();
  const auto a = strict.post(identity, pod(identity, "http://8.8.8.8:8080"));
  ASSERT_EQ(a.status, 200) << a.message;
  EXPECT_EQ(strict.pods.find(identity.id().to_text())->address.ip, "8.8.8.8");

  Hub lan(options(true));
  const auto local = net::NodeIdentity::generate();
  const auto b = lan.post(local, pod(local, "http://localhost:8080"));
  ASSERT_EQ(b.status, 200) << b.message;
  const std::string pinned = lan.pods.find(local.id().to_text())->address.ip;
  EXPECT_TRUE(pinned == "127.0.0.1" || pinned == "::1") << pinned;
}

TEST(RegistrarTest, ARegistrationMustBeNewerThanTheLastAccepted) {
  Hub hub(options(true));
  const auto identity = net::NodeIdentity::generate();
  const int64_t t = unix_ms();
  const Registration first = pod(identity, "http://127.0.0.1:9", t);
  const std::string body = registration_body(first);
  const std::string signature = sign_registration(identity, body);
  EXPECT_EQ(hub.registrar.register_pod(body, signature, "203.0.113.1", t).status, 200);
  // The same bytes again, within the skew window: a replay.
  const auto replay = hub.registrar.register_pod(body, signature, "203.0.113.1", t + 10);
  EXPECT_EQ(replay.status, 403);
  EXPECT_THAT(replay.message, HasSubstr("not newer than the last accepted"));
  EXPECT_EQ(hub.post(identity, pod(identity, "http://127.0.0.1:9", t - 1000)).status, 403);
  EXPECT_EQ(hub.post(identity, pod(identity, "http://127.0.0.1:9", t + 1)).status, 200);
  // The last times are kept only while a replay could pass the skew check.
  EXPECT_EQ(hub.registrar.remembered(), 1u);
  hub.registrar.expire(t + 1 + 5 * 60 * 1000 + 1);
  EXPECT_EQ(hub.registrar.remembered(), 0u);
}

TEST(RegistrarTest, OneIdentityAtTwoUrlsIsRefusedNamingBoth) {
  Hub hub(options(true));
  const auto identity = net::NodeIdentity::generate();
  EXPECT_EQ(hub.post(identity, pod(identity, "http://127.0.0.1:1")).status, 200);
  const auto a = hub.post(identity, pod(identity, "http://127.0.0.1:2", unix_ms() + 1));
  EXPECT_EQ(a.status, 409);
  EXPECT_THAT(a.message, HasSubstr("is live at http://127.0.0.1:1"));
  EXPECT_THAT(a.message, HasSubstr("cannot also register http://127.0.0.1:2"));
  EXPECT_EQ(hub.pods.find(identity.id().to_text())->registration.url, "http://127.0.0.1:1");
}

TEST(RegistrarTest, NewPodsAreLimitedPerAddressHeartbeatsAreNot) {
  Hub hub(options(true, 3));
  std::vector<net::NodeIdentity> pods;
  for (int i = 0; i < 3; ++i) {
    pods.push_back(net::NodeIdentity::generate());
    EXPECT_EQ(hub.post(pods.back(), pod(pods.back(), "http://127.0.0.1:1")).status, 200);
  }
  const auto fourth = net::NodeIdentity::generate();
  const auto a = hub.post(fourth, pod(fourth, "http://127.0.0.1:1"));
  EXPECT_EQ(a.status, 429);
  EXPECT_GT(a.retry_after_seconds, 0);
  EXPECT_THAT(a.message, HasSubstr("too many new pods from 203.0.113.1"));
  // A refused newcomer leaves nothing behind to remember.
  EXPECT_EQ(hub.registrar.remembered(), 3u);
  // A live pod's heartbeat is not a new pod; another address has its own limit; an IPv6
  // address shares its /64's.
  EXPECT_EQ(hub.post(pods[0], pod(pods[0], "http://127.0.0.1:1", unix_ms() + 5)).status, 200);
  EXPECT_EQ(hub.post(fourth, pod(fourth, "http://127.0.0.1:1"), "198.51.100.2").status, 200);
  for (int i = 0; i < 3; ++i) {
    const auto v6 = net::NodeIdentity::generate();
    const std::string from = "2001:db8:1:2::" + std::to_string(i + 1);
    EXPECT_EQ(hub.post(v6, pod(v6, "http://127.0.0.1:1"), from).status, 200);
  }
  const auto v6 = net::NodeIdentity::generate();
  EXPECT_EQ(hub.post(v6, pod(v6, "http://127.0.0.1:1"), "2001:db8:1:2:ffff::9").status, 429);
}

TEST(RegistrarTest, AddressKeys) {
  EXPECT_EQ(address_key("203.0.113.1"), "203.0.113.1");
  EXPECT_EQ(address_key("::ffff:203.0.113.1"), "203.0.113.1");
  EXPECT_EQ(address_key("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
}

TEST(RegistrarTest, GarbageIsRefusedNeverThrown) {
  Hub hub(options(true));
  for (const std::string& body : {std::string(), std::string("{"), std::string("[]"),
                                  std::string("{\"id\": 1}"), std::string(70000, 'x')}) {
    const auto a = hub.registrar.register_pod(body, "sig", "203.0.113.1", unix_ms());
    EXPECT_EQ(a.status, 400) << body.substr(0, 20) << ": " << a.message;
  }
  const auto identity = net::NodeIdentity::generate();
  const std::string body = registration_body(pod(identity, "http://127.0.0.1:1"));
  EXPECT_EQ(hub.registrar.register_pod(body, "not a signature", "x", unix_ms()).status, 403);
}

}  // namespace
}  // namespace herd::hub
