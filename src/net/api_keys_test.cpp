#include "net/api_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

// A private file holding `text` (mode 0600 unless told).
std::filesystem::path key_file(const std::string& name, const std::string& text,
                               mode_t mode = 0600) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(path);
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

const std::string kSecretA(kKeySecretBytes, 'a');
const std::string kSecretB(kKeySecretBytes, 'b');

TEST(ApiKeysTest, KeyFileSkipsCommentsAndBlankLinesAndTrims) {
  const auto path = key_file("herd_keys_ok", "# clients\n\nsk-one\n  sk-two \r\n#sk-not\nsk-three");
  EXPECT_EQ(read_key_file(path), (std::vector<std::string>{"sk-one", "sk-two", "sk-three"}));
  std::filesystem::remove(path);
}

TEST(ApiKeysTest, BadKeyFilesAreClearErrorsThatNeverShowAKey) {
  const auto missing = std::filesystem::path(::testing::TempDir()) / "herd_keys_missing";
  std::filesystem::remove_all(missing);
  EXPECT_THAT([&] { read_key_file(missing); },
              ThrowsMessage<Error>(HasSubstr("herd_keys_missing': cannot be read")));

  const auto empty = key_file("herd_keys_empty", "# only a comment\n\n");
  EXPECT_THAT([&] { read_key_file(empty); }, ThrowsMessage<Error>(HasSubstr("holds no key")));

  const auto spaced = key_file("herd_keys_spaced", "sk-good\nsk secret half\n");
  EXPECT_THAT([&] { read_key_file(spaced); },
              ThrowsMessage<Error>(AllOf(HasSubstr("line 2"), HasSubstr("without spaces"),
                                         Not(HasSubstr("secret")))));

  const auto open = key_file("herd_keys_open", "sk-one\n", 0644);
  EXPECT_THAT([&] { read_key_file(open); },
              ThrowsMessage<Error>(HasSubstr("readable by every user")));

  const auto big = key_file("herd_keys_big", std::string(kMaxKeyFileBytes + 1, 'k'));
  EXPECT_THAT([&] { read_key_file(big); }, ThrowsMessage<Error>(HasSubstr("larger than")));

  const auto long_key = key_file("herd_keys_long", std::string(kMaxKeyChars + 1, 'k') + "\n");
  EXPECT_THAT([&] { read_key_file(long_key); },
              ThrowsMessage<Error>(HasSubstr("a key is 1 to 512 characters")));
  for (const auto& p : {empty, spaced, open, big, long_key}) std::filesystem::remove(p);
}

TEST(ApiKeysTest, BearerHeaders) {
  EXPECT_EQ(bearer_key("Bearer sk-1"), "sk-1");
  EXPECT_EQ(bearer_key("bearer sk-1 "), "sk-1");
  EXPECT_EQ(bearer_key("Bearer "), std::nullopt);
  EXPECT_EQ(bearer_key("Basic c2stMQ=="), std::nullopt);
  EXPECT_EQ(bearer_key(""), std::nullopt);
}

// Found only whole: not a prefix, an extension, another case or a key of another set. The
// set keeps digests, never the keys.
TEST(ApiKeysTest, FindsWholeKeysOnly) {
  ApiKeys keys(kSecretA);
  EXPECT_TRUE(keys.empty());
  EXPECT_FALSE(keys.contains("sk-one"));
  keys.add("sk-one", "test");
  keys.add("sk-two-longer", "test");
  keys.add("sk-one", "test");  // again: kept once
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys.find("sk-one"), key_digest(kSecretA, "sk-one"));
  EXPECT_EQ(keys.find("sk-two-longer"), key_digest(kSecretA, "sk-two-longer"));
  for (const char* other : {"sk-on", "sk-one ", "sk-onee", "SK-ONE", "sk-two", "", "sk-three"}) {
    EXPECT_FALSE(keys.contains(other)) << other;
  }
  EXPECT_EQ(keys.digests(), (std::vector<KeyDigest>{key_digest(kSecretA, "sk-one"),
                                                    key_digest(kSecretA, "sk-two-longer")}));
  EXPECT_THAT([&] { keys.add("with space", "--api-key"); },
              ThrowsMessage<Error>(HasSubstr("--api-key: a key is printable ASCII")));

  // Under a random secret: found all the same, by a digest no one else can compute.
  ApiKeys random;
  random.add("sk-one", "test");
  EXPECT_TRUE(random.contains("sk-one"));
  EXPECT_NE(random.find("sk-one"), key_digest(kSecretA, "sk-one"));
}

// A key's digest is stable under one secret and another under another secret: a name that
// cannot be computed from the key alone.
TEST(ApiKeysTest, DigestsAreKeyedBySecret) {
  EXPECT_EQ(key_digest(kSecretA, "sk-one"), key_digest(kSecretA, "sk-one"));
  EXPECT_NE(key_digest(kSecretA, "sk-one"), key_digest(kSecretB, "sk-one"));
  EXPECT_NE(key_digest(kSecretA, "sk-one"), key_digest(kSecretA, "sk-two"));
  EXPECT_THAT([] { key_digest("short", "sk-one"); },
              ThrowsMessage<Error>(HasSubstr("must be 32 bytes")));
  EXPECT_THAT([] { ApiKeys("short"); }, ThrowsMessage<Error>(HasSubstr("must be 32 bytes")));
}

// Every digest is compared whichever matches: finding the first key of 20000, the last, or
// none takes the same time. An early exit (std::find, memcmp) makes the first about 10000
// times faster than a miss; the bound allows for a busy or sanitized machine. The fastest of
// many rounds is compared, which noise only slows.
TEST(ApiKeysTest, LookupTakesTheSameTimeWhicheverKeyMatches) {
  ApiKeys keys;
  constexpr int kKeys = 20000;
  for (int i = 0; i < kKeys; ++i) keys.add("sk-" + std::to_string(1000000 + i), "test");
  const auto fastest = [&](const std::string& key) {
    auto best = std::chrono::nanoseconds::max();
    for (int round = 0; round < 30; ++round) {
      const auto start = std::chrono::steady_clock::now();
      const bool found = keys.contains(key);
      best = std::min(best, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start));
      EXPECT_EQ(found, key != "sk-0999999");
    }
    return static_cast<double>(best.count());
  };
  const double first = fastest("sk-1000000");
  const double last = fastest("sk-" + std::to_string(1000000 + kKeys - 1));
  const double none = fastest("sk-0999999");
  EXPECT_GT(first, none / 4) << "first " << first << " ns, none " << none << " ns";
  EXPECT_GT(last, none / 4) << "last " << last << " ns, none " << none << " ns";
  EXPECT_GT(none, first / 4) << "first " << first << " ns, none " << none << " ns";
  std::printf("fastest lookups among %d keys: the first %.0f us, the last %.0f us, none %.0f us\n",
              kKeys, first / 1e3, last / 1e3, none / 1e3);
}

}  // namespace
}  // namespace herd::net
