#include "net/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <future>

#include "net/loopback.h"
#include "util/error.h"

namespace herd::net {
namespace {

using ::testing::HasSubstr;

const char* kHexKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

std::shared_ptr<const ClusterKey> key_of(std::string_view text) {
  return std::make_shared<const ClusterKey>(ClusterKey::from_text(text, "test"));
}

// The outcome of one side: the peer it saw, or the error text.
struct Outcome {
  std::optional<PeerIdentity> peer;
  std::string error;
};

template <typename F>
Outcome outcome_of(F&& f) {
  try {
    return Outcome{f(), ""};
  } catch (const Error& e) {
    return Outcome{std::nullopt, e.what()};
  }
}

std::pair<Outcome, Outcome> run_handshake(const AuthConfig& connector, const AuthConfig& acceptor) {
  LoopbackPair pair = make_loopback_pair("connector", "acceptor");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] { return handshake_accept(*pair.b, acceptor, Millis(2000)); });
  });
  Outcome connected =
      outcome_of([&] { return handshake_connect(*pair.a, connector, Millis(2000)); });
  return {connected, accepted.get()};
}

TEST(ClusterKeyTest, ParsesHexOrTakesBytes) {
  ClusterKey hex = ClusterKey::from_text(std::string("  ") + kHexKey + "\n", "test");
  ASSERT_EQ(hex.bytes().size(), 32u);
  EXPECT_EQ(hex.bytes()[1], 0x11);
  ClusterKey text = ClusterKey::from_text("correct horse battery staple\n", "test");
  EXPECT_EQ(text.bytes().size(), 28u);
  EXPECT_EQ(text.bytes()[0], 'c');
  try {
    ClusterKey::from_text("short", "HERD_KEY");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[net] HERD_KEY: a cluster key needs at least 16 bytes"));
  }
}

TEST(ClusterKeyTest, LoadsFilesAndResolvesFlagBeforeEnvironment) {
  std::string path = ::testing::TempDir() + "/herd_net_key";
  std::ofstream(path) << kHexKey << "\n";
  std::optional<ClusterKey> from_file = resolve_cluster_key(path, "ignored because of the flag");
  ASSERT_TRUE(from_file);
  EXPECT_EQ(from_file->bytes().size(), 32u);
  std::optional<ClusterKey> from_env = resolve_cluster_key("", "a passphrase of some length");
  ASSERT_TRUE(from_env);
  EXPECT_EQ(from_env->bytes().size(), 27u);
  EXPECT_FALSE(resolve_cluster_key("", nullptr));
  EXPECT_FALSE(resolve_cluster_key("", ""));
  EXPECT_THAT([] { ClusterKey::load_file("/nonexistent/key"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("key file '/nonexistent/key'")));
  std::remove(path.c_str());
}

TEST(ProofTest, BindsKeyRoleNoncesAndName) {
  ClusterKey key = ClusterKey::from_text(kHexKey, "test");
  ClusterKey other = ClusterKey::from_text("another key, 16+ bytes", "test");
  Nonce a = random_nonce();
  Nonce b = random_nonce();
  EXPECT_NE(a, b);
  Proof proof = compute_proof(key, HandshakeRole::CONNECTOR, a, b, "n1");
  EXPECT_TRUE(verify_proof(key, HandshakeRole::CONNECTOR, a, b, "n1", proof));
  EXPECT_FALSE(verify_proof(other, HandshakeRole::CONNECTOR, a, b, "n1", proof));
  EXPECT_FALSE(verify_proof(key, HandshakeRole::ACCEPTOR, a, b, "n1", proof));
  EXPECT_FALSE(verify_proof(key, HandshakeRole::CONNECTOR, b, a, "n1", proof));
  EXPECT_FALSE(verify_proof(key, HandshakeRole::CONNECTOR, a, b, "n2", proof));
}

TEST(HandshakeTest, SameKeyPassesBothWays) {
  auto key = key_of(kHexKey);
  auto [c, a] = run_handshake(AuthConfig{"node-c", key}, AuthConfig{"node-a", key});
  ASSERT_TRUE(c.peer) << c.error;
  ASSERT_TRUE(a.peer) << a.error;
  EXPECT_EQ(c.peer->name, "node-a");
  EXPECT_EQ(a.peer->name, "node-c");
  EXPECT_TRUE(c.peer->authenticated);
  EXPECT_TRUE(a.peer->authenticated);
}

TEST(HandshakeTest, WrongKeyFailsBothWays) {
  auto [c, a] = run_handshake(AuthConfig{"node-c", key_of("the connector's key")},
                              AuthConfig{"node-a", key_of(kHexKey)});
  EXPECT_THAT(c.error, HasSubstr("handshake with 'node-a' (acceptor): peer failed to prove the "
                                 "cluster key (wrong key?)"));
  EXPECT_THAT(a.error, HasSubstr("handshake with 'node-c' (connector): refused (authentication "
                                 "failed)"));
  EXPECT_FALSE(c.peer);
  EXPECT_FALSE(a.peer);
}

TEST(HandshakeTest, KeyedNodeRefusesPeersWithoutKeyAndViceVersa) {
  auto [c, a] = run_handshake(AuthConfig{"node-c", nullptr}, AuthConfig{"node-a", key_of(kHexKey)});
  EXPECT_THAT(c.error, HasSubstr("refused (authentication required)"));
  EXPECT_THAT(a.error, HasSubstr("'node-c' (connector): peer offered no cluster key"));
  auto [c2, a2] =
      run_handshake(AuthConfig{"node-c", key_of(kHexKey)}, AuthConfig{"node-a", nullptr});
  EXPECT_THAT(c2.error, HasSubstr("refused (authentication failed)"));
  EXPECT_THAT(a2.error, HasSubstr("requires a cluster key, which this node lacks"));
}

TEST(HandshakeTest, InsecureModeNeedsNoProof) {
  auto [c, a] = run_handshake(AuthConfig{"node-c", nullptr}, AuthConfig{"node-a", nullptr});
  ASSERT_TRUE(c.peer) << c.error;
  ASSERT_TRUE(a.peer) << a.error;
  EXPECT_FALSE(c.peer->authenticated);
  EXPECT_EQ(a.peer->name, "node-c");
}

TEST(HandshakeTest, ReplayedProofFails) {
  auto key = key_of(kHexKey);
  // An eavesdropper recorded node-c's proof from an earlier session, in which the acceptor's
  // nonce was `old_nonce`; it now replays node-c's HELLOs to the acceptor.
  Nonce nonce_c = random_nonce();
  Nonce old_nonce = random_nonce();
  Proof recorded = compute_proof(*key, HandshakeRole::CONNECTOR, old_nonce, nonce_c, "node-c");

  LoopbackPair pair = make_loopback_pair("attacker", "acceptor");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] {
      return handshake_accept(*pair.b, AuthConfig{"node-a", key}, Millis(2000));
    });
  });
  Hello hello{kProtocolVersion, AuthMode::HMAC_SHA256, "node-c", nonce_c, std::nullopt};
  send_message(*pair.a, 0, hello);
  Frame frame;
  Hello reply = recv_message<Hello>(*pair.a, Millis(2000), frame);
  EXPECT_NE(reply.nonce, old_nonce);
  hello.proof = recorded;
  send_message(*pair.a, 0, hello);
  Outcome a = accepted.get();
  EXPECT_FALSE(a.peer);
  EXPECT_THAT(a.error, HasSubstr("'node-c' (attacker): peer failed to prove the cluster key"));
  EXPECT_THAT([&] { recv_message<Hello>(*pair.a, Millis(2000), frame); },
              ::testing::ThrowsMessage<Error>(HasSubstr("reported authentication failed")));
}

TEST(HandshakeTest, ProofMadeAsAcceptorCannotServeAsConnectorProof) {
  auto key = key_of(kHexKey);
  LoopbackPair pair = make_loopback_pair("attacker", "acceptor");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] {
      return handshake_accept(*pair.b, AuthConfig{"node-a", key}, Millis(2000));
    });
  });
  Nonce nonce_c = random_nonce();
  Hello hello{kProtocolVersion, AuthMode::HMAC_SHA256, "node-a", nonce_c, std::nullopt};
  send_message(*pair.a, 0, hello);
  Frame frame;
  Hello reply = recv_message<Hello>(*pair.a, Millis(2000), frame);
  hello.proof = reply.proof;  // reflect the acceptor's own proof back
  hello.nonce = reply.nonce;
  send_message(*pair.a, 0, hello);
  EXPECT_FALSE(accepted.get().peer);
}

TEST(HandshakeTest, VersionMismatchIsExplained) {
  LoopbackPair pair = make_loopback_pair("c", "a");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] {
      return handshake_accept(*pair.b, AuthConfig{"node-a", nullptr}, Millis(2000));
    });
  });
  send_message(*pair.a, 0, Hello{2, AuthMode::NONE, "future-node", {}, std::nullopt});
  EXPECT_THAT(accepted.get().error, HasSubstr("peer speaks protocol version 2, this node 1"));
}

TEST(HandshakeTest, SilentPeerTimesOut) {
  LoopbackPair pair = make_loopback_pair("c", "a");
  auto start = std::chrono::steady_clock::now();
  Outcome a = outcome_of([&] {
    return handshake_accept(*pair.b, AuthConfig{"node-a", nullptr}, Millis(200));
  });
  EXPECT_THAT(a.error, HasSubstr("handshake with 'c': no HELLO within 200 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace herd::net
