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

Hello hello_of(const std::string& name, uint8_t fill) {
  Hello h{kProtocolVersion, AuthMode::HMAC_SHA256, name, random_nonce(), std::nullopt};
  h.kx_public.fill(fill);
  h.node_id.fill(fill);
  return h;
}

TEST(ProofTest, BindsKeyRoleAndTranscript) {
  ClusterKey key = ClusterKey::from_text(kHexKey, "test");
  ClusterKey other = ClusterKey::from_text("another key, 16+ bytes", "test");
  Hello h1 = hello_of("n1", 1);
  Hello h2 = hello_of("n2", 2);
  const Transcript t = handshake_transcript(h1, h2);
  Proof proof = compute_proof(key, HandshakeRole::CONNECTOR, t);
  EXPECT_TRUE(verify_proof(key, HandshakeRole::CONNECTOR, t, proof));
  EXPECT_FALSE(verify_proof(other, HandshakeRole::CONNECTOR, t, proof));
  EXPECT_FALSE(verify_proof(key, HandshakeRole::ACCEPTOR, t, proof));
  EXPECT_FALSE(verify_proof(key, HandshakeRole::CONNECTOR, handshake_transcript(h2, h1), proof));
  // Every field of either HELLO changes the transcript; proofs and signatures do not.
  Hello changed = h1;
  changed.encryption = FrameEncryption::PLAINTEXT;
  EXPECT_NE(handshake_transcript(changed, h2), t);
  changed = h2;
  changed.kx_public[7] ^= 1;
  EXPECT_NE(handshake_transcript(h1, changed), t);
  changed = h1;
  changed.node_name = "n3";
  EXPECT_NE(handshake_transcript(changed, h2), t);
  changed = h1;
  changed.proof = proof;
  changed.signature.emplace();
  EXPECT_EQ(handshake_transcript(changed, h2), t);
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
  // An eavesdropper recorded node-c's H1 and H3 from an earlier session; it now replays
  // them to the acceptor, whose fresh nonce and ephemeral key make a new transcript.
  Hello old_h1 = hello_of("node-c", 3);
  Hello old_h2 = hello_of("node-a", 4);
  Proof recorded =
      compute_proof(*key, HandshakeRole::CONNECTOR, handshake_transcript(old_h1, old_h2));

  LoopbackPair pair = make_loopback_pair("attacker", "acceptor");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] {
      return handshake_accept(*pair.b, AuthConfig{"node-a", key}, Millis(2000));
    });
  });
  send_message(*pair.a, 0, old_h1);
  Frame frame;
  Hello reply = recv_message<Hello>(*pair.a, Millis(2000), frame);
  EXPECT_NE(reply.nonce, old_h2.nonce);
  Hello h3 = old_h1;
  h3.proof = recorded;
  send_message(*pair.a, 0, h3);
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
  Hello hello = hello_of("node-a", 5);
  send_message(*pair.a, 0, hello);
  Frame frame;
  Hello reply = recv_message<Hello>(*pair.a, Millis(2000), frame);
  hello.proof = reply.proof;  // reflect the acceptor's own proof and signature back
  hello.signature = reply.signature;
  send_message(*pair.a, 0, hello);
  Outcome a = accepted.get();
  EXPECT_FALSE(a.peer);
  EXPECT_THAT(a.error, HasSubstr("peer failed to prove the cluster key"));
}

TEST(HandshakeTest, VersionMismatchIsExplained) {
  LoopbackPair pair = make_loopback_pair("c", "a");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] {
      return handshake_accept(*pair.b, AuthConfig{"node-a", nullptr}, Millis(2000));
    });
  });
  send_message(*pair.a, 0,
               Hello{kProtocolVersion + 1, AuthMode::NONE, "future-node", {}, std::nullopt});
  EXPECT_THAT(accepted.get().error,
              HasSubstr("peer speaks protocol version " + std::to_string(kProtocolVersion + 1) +
                        ", this node " + std::to_string(kProtocolVersion)));
}

std::shared_ptr<const NodeIdentity> new_identity() {
  return std::make_shared<const NodeIdentity>(NodeIdentity::generate());
}

std::shared_ptr<const AllowList> allowing(const NodeIdentity& identity) {
  return std::make_shared<const AllowList>(
      AllowList::parse(identity.id().to_text() + "  # the one peer\n", "test list"));
}

TEST(HandshakeTest, EachSideLearnsTheOthersVerifiedId) {
  auto id_c = new_identity();
  auto id_a = new_identity();
  for (auto key : {key_of(kHexKey), std::shared_ptr<const ClusterKey>()}) {
    auto [c, a] = run_handshake(AuthConfig{"node-c", key, id_c, allowing(*id_a)},
                                AuthConfig{"node-a", key, id_a, allowing(*id_c)});
    ASSERT_TRUE(c.peer) << c.error;
    ASSERT_TRUE(a.peer) << a.error;
    EXPECT_EQ(c.peer->id, id_a->id());
    EXPECT_EQ(a.peer->id, id_c->id());
  }
}

TEST(HandshakeTest, PeerOffTheAllowListIsRefusedByItsId) {
  auto id_c = new_identity();
  auto id_a = new_identity();
  auto stranger = new_identity();
  // The acceptor's list lacks the connector: it refuses after H3, and the connector learns
  // it from the ERROR in place of the first reply.
  {
    LoopbackPair pair = make_loopback_pair("connector", "acceptor");
    auto accepted = std::async(std::launch::async, [&] {
      return outcome_of([&] {
        return handshake_accept(*pair.b, AuthConfig{"node-a", nullptr, id_a, allowing(*stranger)},
                                Millis(2000));
      });
    });
    Outcome c = outcome_of([&] {
      return handshake_connect(*pair.a, AuthConfig{"node-c", nullptr, id_c}, Millis(2000));
    });
    Outcome a = accepted.get();
    ASSERT_TRUE(c.peer) << c.error;
    EXPECT_THAT(a.error, HasSubstr("node id " + id_c->id().to_text() +
                                   " is not on this node's allow-list (--allow-ids)"));
    Frame frame;
    EXPECT_THAT([&] { recv_message<Ready>(*pair.a, Millis(2000), frame); },
                ::testing::ThrowsMessage<Error>(HasSubstr("is not on the peer's allow-list")));
  }
  // The connector's list lacks the acceptor.
  auto [c, a] = run_handshake(AuthConfig{"node-c", nullptr, id_c, allowing(*stranger)},
                              AuthConfig{"node-a", nullptr, id_a});
  EXPECT_THAT(c.error, HasSubstr("node id " + id_a->id().to_text() + " is not on this node's"));
  EXPECT_THAT(a.error, HasSubstr("refused (authentication failed)"));
}

TEST(HandshakeTest, ClaimedIdWithoutItsKeyFails) {
  auto victim = new_identity();
  auto id_a = new_identity();
  LoopbackPair pair = make_loopback_pair("attacker", "acceptor");
  auto accepted = std::async(std::launch::async, [&] {
    return outcome_of([&] {
      return handshake_accept(*pair.b, AuthConfig{"node-a", nullptr, id_a, allowing(*victim)},
                              Millis(2000));
    });
  });
  Hello hello = hello_of("node-v", 6);
  hello.auth = AuthMode::NONE;
  hello.node_id = victim->id().bytes;
  send_message(*pair.a, 0, hello);
  Frame frame;
  Hello reply = recv_message<Hello>(*pair.a, Millis(2000), frame);
  hello.signature = NodeIdentity::generate().sign(ConstBytes(reply.nonce));
  send_message(*pair.a, 0, hello);
  EXPECT_THAT(accepted.get().error,
              HasSubstr("failed to sign the handshake with the identity it claims (" +
                        victim->id().to_text() + ")"));
}

TEST(HandshakeTest, PlaintextOnOneEndOnlyIsRefused) {
  AuthConfig plain{"node-c", nullptr};
  plain.plaintext = true;
  auto [c, a] = run_handshake(plain, AuthConfig{"node-a", nullptr});
  EXPECT_THAT(a.error, HasSubstr("peer runs with --insecure (plaintext frames) and this node "
                                 "encrypts; both ends must agree"));
  EXPECT_THAT(c.error, HasSubstr("refused (protocol error): one end runs with --insecure"));
  AuthConfig plain_a{"node-a", nullptr};
  plain_a.plaintext = true;
  auto [c2, a2] = run_handshake(plain, plain_a);
  ASSERT_TRUE(c2.peer) << c2.error;
  EXPECT_FALSE(c2.peer->encrypted);
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
