#include "net/identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

std::filesystem::path temp_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(NodeIdTest, TextRoundTripsAndRejectsOtherText) {
  NodeIdentity identity = NodeIdentity::generate();
  const std::string text = identity.id().to_text();
  EXPECT_EQ(text.size(), kNodeIdChars);
  EXPECT_EQ(NodeId::from_text(text, "test"), identity.id());
  for (std::string bad : {std::string(""), text.substr(1), text + "A", text.substr(0, 42) + "!",
                          text.substr(0, 42) + "+"}) {
    EXPECT_THAT([&] { NodeId::from_text(bad, "allow-list line 3"); },
                ::testing::ThrowsMessage<Error>(HasSubstr("[net] allow-list line 3: '")))
        << bad;
  }
}

TEST(NodeIdentityTest, SignaturesVerifyOnlyForTheirIdAndMessage) {
  NodeIdentity a = NodeIdentity::generate();
  NodeIdentity b = NodeIdentity::generate();
  const uint8_t message[] = {1, 2, 3};
  const uint8_t other[] = {1, 2, 4};
  Signature s = a.sign(message);
  EXPECT_TRUE(verify_signature(a.id(), message, s));
  EXPECT_FALSE(verify_signature(b.id(), message, s));
  EXPECT_FALSE(verify_signature(a.id(), other, s));
}

TEST(NodeIdentityTest, FileRoundTripsWithComments) {
  NodeIdentity a = NodeIdentity::generate();
  const std::string text = a.to_text();
  EXPECT_THAT(text, HasSubstr(a.id().to_text()));  // the id is in a comment, for people
  NodeIdentity b = NodeIdentity::from_text("\n# mine\n" + text + "\n\n", "test");
  EXPECT_EQ(b.id(), a.id());
}

TEST(NodeIdentityTest, CorruptFilesAreClearErrors) {
  const std::string seed(64, 'a');
  for (std::string bad :
       {std::string(""), std::string("# only a comment\n"),
        "herd-identity-v1 ed25519 " + seed.substr(1), "herd-identity-v1 rsa " + seed,
        "herd-identity-v2 ed25519 " + seed, "herd-identity-v1 ed25519 " + seed + " extra",
        "herd-identity-v1 ed25519 " + seed + "\nherd-identity-v1 ed25519 " + seed,
        "herd-identity-v1 ed25519 " + std::string(63, 'a') + "g"}) {
    EXPECT_THAT([&] { NodeIdentity::from_text(bad, "identity file 'x'"); },
                ::testing::ThrowsMessage<Error>(
                    HasSubstr("[net] identity file 'x': not a herd identity file")))
        << bad;
  }
}

TEST(NodeIdentityTest, CreatedOnFirstUseWithMode0600ThenKept) {
  const std::filesystem::path dir = temp_dir("herd_identity_first_use");
  const std::filesystem::path path = dir / "herd" / "identity";
  NodeIdentity first = NodeIdentity::load_or_create(path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  NodeIdentity again = NodeIdentity::load_or_create(path);
  EXPECT_EQ(again.id(), first.id());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "herd"),
                          std::filesystem::directory_iterator()),
            1);  // no temporary file left behind

  // A corrupt file is an error, and stays as it was.
  std::ofstream(path) << "garbage\n";
  EXPECT_THAT([&] { NodeIdentity::load_or_create(path); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not a herd identity file")));
  EXPECT_EQ(read(path), "garbage\n");
  std::filesystem::remove_all(dir);
}

// Nodes started together (tests start 16 with one config directory) all load or create
// the same identity: none fails for opening the file while another links it into place.
TEST(NodeIdentityTest, ManyStartingAtOnceAllGetOneIdentity) {
  for (int round = 0; round < 20; ++round) {
    const std::filesystem::path dir = temp_dir("herd_identity_race");
    const std::filesystem::path path = dir / "herd" / "identity";
    std::vector<std::string> ids(8);
    std::vector<std::thread> starts;
    for (size_t i = 0; i < ids.size(); ++i) {
      starts.emplace_back([&, i] { ids[i] = NodeIdentity::load_or_create(path).id().to_text(); });
    }
    for (std::thread& t : starts) t.join();
    for (const std::string& id : ids) EXPECT_EQ(id, ids[0]) << "round " << round;
    std::filesystem::remove_all(dir);
  }
}

TEST(NodeIdentityTest, DefaultPathFollowsXdgThenHome) {
  EXPECT_EQ(NodeIdentity::default_path("/x/config", "/home/u"), "/x/config/herd/identity");
  EXPECT_EQ(NodeIdentity::default_path(nullptr, "/home/u"), "/home/u/.config/herd/identity");
  EXPECT_EQ(NodeIdentity::default_path("relative", "/home/u"), "/home/u/.config/herd/identity");
  EXPECT_THROW(NodeIdentity::default_path(nullptr, nullptr), Error);
}

}  // namespace
}  // namespace herd::net
