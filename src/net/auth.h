// The HELLO handshake (since protocol version 2): it authenticates both ends, gives each a
// verified node id, and derives the keys that encrypt every frame after it
// (frame_cipher.h).
//
// Three things hold a node to account:
//   - the cluster key (`--key FILE` or HERD_KEY): a node given one accepts only peers that
//     prove they hold the same key, and proves it holds it too. A node without one runs in
//     insecure mode (no proofs; loopback-only listening unless --insecure-listen);
//   - its identity (identity.h): an Ed25519 key kept in the config directory; each side
//     signs the transcript with it, so the peer learns a verified id, which an allow-list
//     (allow_list.h, --allow-ids) may require;
//   - an ephemeral X25519 key per connection: the session keys come from the exchange, the
//     transcript and (when keyed) the cluster key, so a recorded session stays secret even
//     if the cluster key or an identity leaks later (forward secrecy), and a man in the
//     middle without the cluster key gets no session keys.
//
// Sequence (C connects to A; nonces are 32 random bytes, fresh per connection; kx_X is X's
// ephemeral X25519 public key, id_X its Ed25519 public key):
//   C -> A  H1 = HELLO{version, auth, encryption, name_C, nonce_C, kx_C, id_C}
//   A -> C  H2 = HELLO{version, auth, encryption, name_A, nonce_A, kx_A, id_A,
//                      proof_A (only when keyed), sig_A}
//   C -> A  H3 = H1 + {proof_C (only when keyed), sig_C}
// core(H)   = the HELLO's encoding without proof and signature (has_* bytes 0)
// T         = BLAKE2b-256("herd-hello-v2" | u32 len | core(H1) | u32 len | core(H2))
// proof_X   = HMAC-SHA256(cluster key, "herd-proof-v2" | role of X | T)
// sig_X     = Ed25519-sign(identity of X, "herd-sign-v2" | role of X | T)
// shared    = X25519(own ephemeral secret, peer's kx)       (an all-zero result is refused)
// k_CA|k_AC = BLAKE2b-512(key: BLAKE2b-256(cluster key), or no key when unkeyed;
//                         "herd-session-v2" | shared | T)
// T covers both nonces, names, ephemeral keys, ids and modes, so a proof or signature is
// good for this connection only (no replay), the role label stops one made as acceptor
// from passing as a connector's (reflection), and a tampered H1 or H2 (a downgrade to
// plaintext, a swapped kx) fails both. Each side checks the other's proof in constant
// time and its signature, then the allow-list; on failure it sends ERROR and drops the
// connection. From H3 on, C's frames are sealed with k_CA and A's with k_AC (unless both
// said PLAINTEXT: --insecure); so an acceptor that refuses H3 sends its ERROR sealed, and
// the connector learns of it from the ERROR that arrives in place of the first reply.
// Both ends must agree on the encryption; a mismatch is refused naming the flag.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/allow_list.h"
#include "net/identity.h"
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

// The transcript hash T of a handshake (see above) from the first two HELLOs.
using Transcript = std::array<uint8_t, 32>;
Transcript handshake_transcript(const Hello& h1, const Hello& h2);

Proof compute_proof(const ClusterKey& key, HandshakeRole prover, const Transcript& transcript);
// Constant-time comparison against the expected proof.
bool verify_proof(const ClusterKey& key, HandshakeRole prover, const Transcript& transcript,
                  const Proof& proof);

struct AuthConfig {
  std::string node_name;                  // 1..kMaxNodeNameBytes printable ASCII
  std::shared_ptr<const ClusterKey> key;  // null: insecure mode, no proofs
  // This node's identity; null: a fresh one per connection (tests, benchmarks), so peers
  // learn an id that no allow-list names.
  std::shared_ptr<const NodeIdentity> identity{};
  std::shared_ptr<const AllowList> allowed_ids{};  // null: any verified id is accepted
  // Plaintext frames after the handshake (--insecure: a trusted link where encryption's
  // cost matters); both ends must agree.
  bool plaintext = false;
};

struct PeerIdentity {
  std::string name;        // the name the peer gave in its HELLO
  bool authenticated;      // proved the cluster key
  NodeId id{};             // the peer signed the transcript with this identity
  bool encrypted = false;  // frames after the handshake are sealed
};

// Run the handshake on a fresh connection (before finish_handshake). Each throws
// herd::Error "[net] handshake with '<peer>': <reason>" when the peer does not complete it
// within `timeout`, speaks another version, refuses us, or fails to prove the key; the
// peer is sent an ERROR saying why (without secrets) before the throw.
// `heard_hello`, when given, is called once the connector's first HELLO has arrived whole
// and names this protocol version and modes (the handshake slots favour such a peer over
// one that has sent less: handshake_slots.h).
PeerIdentity handshake_connect(Connection& connection, const AuthConfig& config, Millis timeout);
PeerIdentity handshake_accept(Connection& connection, const AuthConfig& config, Millis timeout,
                              const std::function<void()>& heard_hello = {});

}  // namespace herd::net
