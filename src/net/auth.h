// The HELLO handshake and the cluster key. A node given a key (`--key FILE` or HERD_KEY)
// accepts only peers that prove they hold the same key, and proves it holds it too;
// a node without a key runs in explicit insecure mode (no proofs, loopback-only listening
// unless --insecure-listen).
//
// Sequence (C connects to A; nonces are 32 random bytes, fresh per connection):
//   C -> A  HELLO{version, auth, name_C, nonce_C}
//   A -> C  HELLO{version, auth, name_A, nonce_A, proof_A}     proof only when A has a key
//   C -> A  HELLO{version, auth, name_C, nonce_C, proof_C}     only when keyed
// proof_X = HMAC-SHA256(key, "herd-hello-v1" | role label of X | nonce of the verifier |
//                            nonce of X | u32 length | name of X)
// The role label stops a proof made as acceptor from serving as a connector's; the
// verifier's fresh nonce stops a recorded proof from being replayed. Each side checks the
// other's proof in constant time and, on failure, sends ERROR and drops the connection.
// The connector learns of a rejected proof_C from the ERROR that then arrives in place of
// the first reply.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/messages.h"
#include "net/transport.h"

namespace herd::net {

// A shared secret, wiped from memory when destroyed. Move-only.
class ClusterKey {
 public:
  static constexpr size_t kMinBytes = 16;
  static constexpr size_t kMaxFileBytes = 4096;

  // Key text: surrounding whitespace is trimmed; what remains is decoded as hex when it is
  // an even number (>= 32) of hex digits, else taken as bytes. At least kMinBytes bytes.
  // `origin` names where the text came from in errors ("key file 'k'", "HERD_KEY").
  static ClusterKey from_text(std::string_view text, std::string_view origin);
  // Reads a key file (as from_text); a missing, empty, short or huge file is an error.
  static ClusterKey load_file(const std::string& path);

  ClusterKey(ClusterKey&& other) noexcept = default;
  ClusterKey& operator=(ClusterKey&& other) noexcept;
  ClusterKey(const ClusterKey&) = delete;
  ClusterKey& operator=(const ClusterKey&) = delete;
  ~ClusterKey();

  ConstBytes bytes() const { return bytes_; }

 private:
  explicit ClusterKey(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  std::vector<uint8_t> bytes_;
};

// What the CLI calls: `--key FILE` when given (non-empty), else the HERD_KEY environment
// value (the key text itself, as from_text) when set and non-empty, else nullopt (insecure
// mode). The caller passes std::getenv("HERD_KEY"), so this reads no global state.
std::optional<ClusterKey> resolve_cluster_key(std::string_view key_file, const char* herd_key_env);

enum class HandshakeRole { CONNECTOR, ACCEPTOR };

// 32 bytes from libsodium's CSPRNG.
Nonce random_nonce();

Proof compute_proof(const ClusterKey& key, HandshakeRole prover, const Nonce& verifier_nonce,
                    const Nonce& prover_nonce, std::string_view prover_name);
// Constant-time comparison against the expected proof.
bool verify_proof(const ClusterKey& key, HandshakeRole prover, const Nonce& verifier_nonce,
                  const Nonce& prover_nonce, std::string_view prover_name, const Proof& proof);

struct AuthConfig {
  std::string node_name;                  // 1..kMaxNodeNameBytes printable ASCII
  std::shared_ptr<const ClusterKey> key;  // null: insecure mode, no proofs
};

struct PeerIdentity {
  std::string name;    // the name the peer gave in its HELLO
  bool authenticated;  // proved the cluster key
};

// Run the handshake on a fresh connection (before finish_handshake). Each throws
// herd::Error "[net] handshake with '<peer>': <reason>" when the peer does not complete it
// within `timeout`, speaks another version, refuses us, or fails to prove the key; the
// peer is sent an ERROR saying why (without secrets) before the throw.
PeerIdentity handshake_connect(Connection& connection, const AuthConfig& config, Millis timeout);
PeerIdentity handshake_accept(Connection& connection, const AuthConfig& config, Millis timeout);

}  // namespace herd::net
