#include "hub/hub_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hub/credits.h"
#include "util/error.h"

namespace herd::hub {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

const std::string kSecret(net::kKeySecretBytes, 's');
const std::string kOtherSecret(net::kKeySecretBytes, 't');

std::filesystem::path temp_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(HubSecretTest, CreatedOnFirstUseWithMode0600ThenKept) {
  const auto dir = temp_dir("herd_hub_secret");
  const auto path = dir / "herd" / "hub.secret";
  const std::string first = load_or_create_hub_secret(path);
  EXPECT_EQ(first.size(), net::kKeySecretBytes);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(load_or_create_hub_secret(path), first);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "herd"),
                          std::filesystem::directory_iterator()),
            1);  // no temporary file left behind
  // Another hub's secret is another secret.
  EXPECT_NE(load_or_create_hub_secret(dir / "other.secret"), first);

  // Readable by every user: refused, not read.
  ::chmod(path.c_str(), 0644);
  EXPECT_THAT([&] { load_or_create_hub_secret(path); },
              ThrowsMessage<Error>(HasSubstr("readable by every user")));
  // Corrupt: an error, and the file stays as it was.
  std::ofstream(dir / "bad.secret") << "herd-hub-secret-v1 1234\n";
  ::chmod((dir / "bad.secret").c_str(), 0600);
  EXPECT_THAT([&] { load_or_create_hub_secret(dir / "bad.secret"); },
              ThrowsMessage<Error>(HasSubstr("not a herd hub secret file")));
  EXPECT_TRUE(std::filesystem::exists(dir / "bad.secret"));
  std::filesystem::remove_all(dir);
}

// Replicas started at once on one secret file all read the one secret.
TEST(HubSecretTest, HubsStartingAtOnceShareOneSecret) {
  const auto dir = temp_dir("herd_hub_secret_race");
  std::vector<std::string> secrets(8);
  std::vector<std::thread> starts;
  for (size_t i = 0; i < secrets.size(); ++i) {
    starts.emplace_back([&, i] { secrets[i] = load_or_create_hub_secret(dir / "hub.secret"); });
  }
  for (std::thread& t : starts) t.join();
  for (const std::string& s : secrets) EXPECT_EQ(s, secrets[0]);
  std::filesystem::remove_all(dir);
}

TEST(HubSecretTest, DefaultPathFollowsXdgDataThenHome) {
  EXPECT_EQ(default_hub_secret_path("/data", "/home/a"), "/data/herd/hub.secret");
  EXPECT_EQ(default_hub_secret_path(nullptr, "/home/a"), "/home/a/.local/share/herd/hub.secret");
  EXPECT_THROW(default_hub_secret_path(nullptr, nullptr), Error);
}

// Account names: stable under one secret, others under another, never the key's unkeyed
// hash (what anyone holding a key, or trying weak keys, could compute).
TEST(HubKeysTest, AccountsAreHmacsUnderTheSecret) {
  const HubKeys keys(kSecret, {"client-a", "client-b"}, {"operator"});
  const HubKeys again(kSecret, {"client-a"}, {});
  const HubKeys other(kOtherSecret, {"client-a"}, {});
  const std::string a = *keys.client_account("Bearer client-a");
  EXPECT_EQ(a, Credits::client_account(kSecret, "client-a"));
  EXPECT_EQ(*again.client_account("Bearer client-a"), a);
  EXPECT_NE(*other.client_account("Bearer client-a"), a);
  EXPECT_NE(*keys.client_account("Bearer client-b"), a);
  EXPECT_EQ(a.rfind("client:", 0), 0u);
  EXPECT_EQ(a.size(), 7u + 32u);
  EXPECT_EQ(keys.accounts(),
            (std::vector<std::string>{a, *keys.client_account("Bearer client-b")}));

  EXPECT_EQ(keys.client_account("Bearer operator"), std::nullopt);  // not a client key
  EXPECT_EQ(keys.client_account("Bearer client-"), std::nullopt);
  EXPECT_EQ(keys.client_account(""), std::nullopt);
  // An open hub: everyone is the open client.
  const HubKeys open(kSecret, {}, {});
  EXPECT_TRUE(open.open());
  EXPECT_EQ(open.client_account(""), "client:open");
  EXPECT_THAT([] { HubKeys(kSecret, {"two words"}, {}); },
              ThrowsMessage<Error>(HasSubstr("a client key: a key is printable ASCII")));
}

TEST(HubKeysTest, TheLedgerIsTheOperatorsAndEachClientsOwnAccountIts) {
  const HubKeys keys(kSecret, {"client-a", "client-b"}, {"operator"});
  const std::string a = Credits::client_account(kSecret, "client-a");
  const std::string b = Credits::client_account(kSecret, "client-b");
  const auto status = [&](std::string_view authorization, std::string_view account) {
    const auto refusal = keys.ledger_refusal(authorization, account);
    return refusal ? refusal->status : 200;
  };
  EXPECT_EQ(status("Bearer operator", ""), 200);
  EXPECT_EQ(status("Bearer operator", a), 200);
  EXPECT_EQ(status("", ""), 401);
  EXPECT_EQ(status("", a), 401);
  EXPECT_EQ(status("Bearer guess", ""), 401);
  EXPECT_EQ(status("Basic operator", ""), 401);
  EXPECT_EQ(status("Bearer client-a", ""), 403);
  EXPECT_EQ(status("Bearer client-a", a), 200);
  EXPECT_EQ(status("Bearer client-a", b), 403);
  EXPECT_EQ(status("Bearer client-b", b), 200);
  EXPECT_EQ(status("Bearer client-a", "fee"), 403);
  // The refusal names the client's own account (and only its own).
  EXPECT_THAT(keys.ledger_refusal("Bearer client-a", "")->message, HasSubstr(a));
  EXPECT_THAT(keys.ledger_refusal("Bearer client-a", b)->message, ::testing::Not(HasSubstr(b)));

  // Without operator keys the ledger is no one's, but a client's own account still its.
  const HubKeys closed(kSecret, {"client-a"}, {});
  EXPECT_EQ(closed.ledger_refusal("", "")->status, 403);
  EXPECT_EQ(closed.ledger_refusal("Bearer operator", "")->status, 403);
  EXPECT_FALSE(closed.ledger_refusal("Bearer client-a", a));
  // An open hub: client:open is everyone's, so its history is the operator's only.
  const HubKeys open(kSecret, {}, {"operator"});
  EXPECT_EQ(open.ledger_refusal("", "client:open")->status, 401);
  EXPECT_FALSE(open.ledger_refusal("Bearer operator", "client:open"));
}

}  // namespace
}  // namespace herd::hub
