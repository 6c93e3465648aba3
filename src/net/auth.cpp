#include "net/auth.h"

#include <sodium.h>

#include <chrono>
#include <cstring>
#include <iterator>

#include "net/secret_file.h"
#include "util/error.h"

namespace herd::net {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view role_label(HandshakeRole role) {
  return role == HandshakeRole::CONNECTOR ? "connector" : "acceptor";
}

}  // namespace

// ---- ClusterKey ----

ClusterKey& ClusterKey::operator=(ClusterKey&& other) noexcept {
  if (this != &other) {
    if (!bytes_.empty()) sodium_memzero(bytes_.data(), bytes_.size());
    bytes_ = std::move(other.bytes_);
  }
  return *this;
}

ClusterKey::~ClusterKey() {
  if (!bytes_.empty()) sodium_memzero(bytes_.data(), bytes_.size());
}

ClusterKey ClusterKey::from_text(std::string_view text, std::string_view origin) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  bool hex = text.size() >= 2 * kMinBytes && text.size() % 2 == 0;
  for (size_t i = 0; hex && i < text.size(); ++i) hex = hex_digit(text[i]) >= 0;
  std::vector<uint8_t> bytes;
  if (hex) {
    bytes.resize(text.size() / 2);
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<uint8_t>(hex_digit(text[2 * i]) * 16 + hex_digit(text[2 * i + 1]));
    }
  } else {
    bytes.assign(text.begin(), text.end());
  }
  if (bytes.size() < kMinBytes) {
    if (!bytes.empty()) sodium_memzero(bytes.data(), bytes.size());
    throw Error("net", std::string(origin) + ": a cluster key needs at least " +
                           std::to_string(kMinBytes) + " bytes (got " +
                           std::to_string(text.size()) +
                           "); make one with: head -c 32 /dev/urandom | xxd -p -c 64");
  }
  return ClusterKey(std::move(bytes));
}

ClusterKey ClusterKey::load_file(const std::string& path) {
  const std::string origin = "key file '" + path + "'";
  const std::optional<SecretText> text =
      read_secret_file(path, origin, kMaxFileBytes, "is this really a key?");
  if (!text) throw Error("net", origin + ": cannot open it");
  return from_text(text->view(), origin);
}

std::optional<ClusterKey> resolve_cluster_key(std::string_view key_file, const char* herd_key_env) {
  if (!key_file.empty()) return ClusterKey::load_file(std::string(key_file));
  if (herd_key_env != nullptr && herd_key_env[0] != '\0') {
    return ClusterKey::from_text(herd_key_env, "HERD_KEY");
  }
  return std::nullopt;
}

// ---- transcript and proofs ----

namespace {

constexpr std::string_view kTranscriptDomain = "herd-hello-v2";
constexpr std::string_view kProofDomain = "herd-proof-v2";
constexpr std::string_view kSignDomain = "herd-sign-v2";
constexpr std::string_view kSessionDomain = "herd-session-v2";

// The HELLO's encoding without proof and signature: what the transcript covers.
std::vector<uint8_t> core_bytes(const Hello& hello) {
  Hello core = hello;
  core.proof.reset();
  core.signature.reset();
  Payload payload = encode(core);
  return std::move(payload.head);
}

void put_u32(uint8_t out[4], uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

// "herd-sign-v2" | role | T: what an identity signs.
std::vector<uint8_t> signed_message(HandshakeRole signer, const Transcript& transcript) {
  std::string_view label = role_label(signer);
  std::vector<uint8_t> m(kSignDomain.size() + label.size() + transcript.size());
  std::memcpy(m.data(), kSignDomain.data(), kSignDomain.size());
  std::memcpy(m.data() + kSignDomain.size(), label.data(), label.size());
  std::memcpy(m.data() + kSignDomain.size() + label.size(), transcript.data(), transcript.size());
  return m;
}

}  // namespace

Nonce random_nonce() {
  ensure_sodium();
  Nonce nonce;
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

Transcript handshake_transcript(const Hello& h1, const Hello& h2) {
  ensure_sodium();
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, sizeof(Transcript));
  auto update = [&](const void* p, size_t size) {
    crypto_generichash_update(&state, static_cast<const unsigned char*>(p), size);
  };
  update(kTranscriptDomain.data(), kTranscriptDomain.size());
  for (const Hello* h : {&h1, &h2}) {
    std::vector<uint8_t> core = core_bytes(*h);
    uint8_t length[4];
    put_u32(length, static_cast<uint32_t>(core.size()));
    update(length, sizeof length);
    update(core.data(), core.size());
  }
  Transcript t;
  crypto_generichash_final(&state, t.data(), t.size());
  return t;
}

Proof compute_proof(const ClusterKey& key, HandshakeRole prover, const Transcript& transcript) {
  ensure_sodium();
  std::string_view label = role_label(prover);
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, key.bytes().data(), key.bytes().size());
  auto update = [&](const void* p, size_t size) {
    crypto_auth_hmacsha256_update(&state, static_cast<const unsigned char*>(p), size);
  };
  update(kProofDomain.data(), kProofDomain.size());
  update(label.data(), label.size());
  update(transcript.data(), transcript.size());
  Proof proof;
  crypto_auth_hmacsha256_final(&state, proof.data());
  sodium_memzero(&state, sizeof state);
  return proof;
}

bool verify_proof(const ClusterKey& key, HandshakeRole prover, const Transcript& transcript,
                  const Proof& proof) {
  Proof expected = compute_proof(key, prover, transcript);
  return sodium_memcmp(expected.data(), proof.data(), proof.size()) == 0;
}

// ---- the handshake ----

namespace {

using Clock = std::chrono::steady_clock;

// How errors name the peer: its address, and once it sent a HELLO, the name it claims.
std::string who(Connection& connection, const Hello* hello) {
  if (hello == nullptr) return "'" + connection.peer_name() + "'";
  return "'" + hello->node_name + "' (" + connection.peer_name() + ")";
}

// Tells the peer why we give up (best effort: it may be gone) and throws.
[[noreturn]] void refuse(Connection& connection, const Hello* hello, ErrorCode code,
                         const std::string& to_peer, const std::string& reason) {
  try {
    send_message(connection, 0, ErrorReply{code, to_peer});
  } catch (const Error&) {
  }
  throw Error("net", "handshake with " + who(connection, hello) + ": " + reason);
}

Millis remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return left.count() > 0 ? left : Millis(0);
}

// The peer's next HELLO. An ERROR from the peer, a timeout or another frame type ends the
// handshake with a message naming the peer.
// `earlier`: the peer's previous HELLO, if any, to name it in errors.
Hello recv_hello(Connection& connection, const Hello* earlier, Clock::time_point deadline,
                 Millis timeout) {
  std::optional<Frame> frame = connection.try_recv_frame(remaining(deadline));
  if (!frame) {
    connection.fail("handshake timed out");
    throw Error("net", "handshake with " + who(connection, earlier) + ": no HELLO within " +
                           std::to_string(timeout.count()) + " ms");
  }
  if (frame->header.type == MessageType::ERROR) {
    ErrorReply reply = decode_error(frame->payload());
    throw Error("net", "handshake with " + who(connection, earlier) + ": refused (" +
                           error_code_name(reply.code) + "): " + printable(reply.message));
  }
  if (frame->header.type != MessageType::HELLO) {
    refuse(connection, earlier, ErrorCode::PROTOCOL, "expected HELLO",
           "sent " + std::string(message_type_name(frame->header.type)) + " instead of HELLO");
  }
  try {
    return decode_hello(frame->payload());
  } catch (const Error& e) {
    refuse(connection, earlier, ErrorCode::PROTOCOL, "malformed HELLO", e.what());
  }
}

AuthMode mode_of(const AuthConfig& config) {
  return config.key ? AuthMode::HMAC_SHA256 : AuthMode::NONE;
}

FrameEncryption encryption_of(const AuthConfig& config) {
  return config.plaintext ? FrameEncryption::PLAINTEXT : FrameEncryption::XCHACHA20_POLY1305;
}

// Checks what the peer's first HELLO says against this node: version, key, encryption.
void check_modes(Connection& connection, const AuthConfig& config, const Hello& hello) {
  if (hello.protocol_version != kProtocolVersion) {
    std::string why = "peer speaks protocol version " + std::to_string(hello.protocol_version) +
                      ", this node " + std::to_string(kProtocolVersion);
    refuse(connection, &hello, ErrorCode::VERSION, why, why);
  }
  if (config.key && hello.auth != AuthMode::HMAC_SHA256) {
    refuse(connection, &hello, ErrorCode::AUTH_REQUIRED,
           "this node requires a cluster key (--key FILE or HERD_KEY)",
           "peer offered no cluster key");
  }
  if (!config.key && hello.auth == AuthMode::HMAC_SHA256) {
    refuse(connection, &hello, ErrorCode::AUTH_FAILED,
           "this node has no cluster key and cannot prove one; start it with --key",
           "peer requires a cluster key, which this node lacks; give --key FILE or HERD_KEY");
  }
  if (hello.encryption != encryption_of(config)) {
    const bool we_plain = config.plaintext;
    std::string why = std::string(we_plain ? "this node" : "peer") +
                      " runs with --insecure (plaintext frames) and " +
                      (we_plain ? "peer" : "this node") +
                      " encrypts; both ends must agree (give both --insecure, or neither)";
    refuse(connection, &hello, ErrorCode::PROTOCOL,
           "one end runs with --insecure (plaintext frames) and the other encrypts; both "
           "ends must agree (give both --insecure, or neither)",
           why);
  }
}

// An ephemeral X25519 key pair, wiped when it goes out of scope.
struct Ephemeral {
  KxPublic public_key{};
  std::array<uint8_t, crypto_kx_SECRETKEYBYTES> secret{};
  Ephemeral() {
    static_assert(crypto_kx_PUBLICKEYBYTES == kKxPublicBytes);
    ensure_sodium();
    crypto_kx_keypair(public_key.data(), secret.data());
  }
  ~Ephemeral() { sodium_memzero(secret.data(), secret.size()); }
  Ephemeral(const Ephemeral&) = delete;
  Ephemeral& operator=(const Ephemeral&) = delete;
};

// k_CA | k_AC (see auth.h), as this end's send and receive keys (`role`: this end's).
// Refuses the peer (ERROR, throw) when its ephemeral key is a low-order point (the shared
// secret would be all zeros).
SessionKeys derive_session_keys(Connection& connection, const AuthConfig& config,
                                const Ephemeral& own, const Hello& peer,
                                const Transcript& transcript, HandshakeRole role) {
  static_assert(crypto_scalarmult_BYTES == 32);
  uint8_t shared[crypto_scalarmult_BYTES];
  if (crypto_scalarmult(shared, own.secret.data(), peer.kx_public.data()) != 0) {
    refuse(connection, &peer, ErrorCode::PROTOCOL, "bad ephemeral key",
           "peer sent a low-order ephemeral key");
  }
  SessionKeys out;
  uint8_t cluster[crypto_generichash_BYTES] = {};
  if (config.key) {
    crypto_generichash(cluster, sizeof cluster, config.key->bytes().data(),
                       config.key->bytes().size(), nullptr, 0);
  }
  crypto_generichash_state state;
  crypto_generichash_init(&state, config.key ? cluster : nullptr, config.key ? sizeof cluster : 0,
                          2 * kSessionKeyBytes);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(kSessionDomain.data()),
                            kSessionDomain.size());
  crypto_generichash_update(&state, shared, sizeof shared);
  crypto_generichash_update(&state, transcript.data(), transcript.size());
  uint8_t keys[2 * kSessionKeyBytes];
  crypto_generichash_final(&state, keys, sizeof keys);
  const uint8_t* connector_to_acceptor = keys;
  const uint8_t* acceptor_to_connector = keys + kSessionKeyBytes;
  const bool connector = role == HandshakeRole::CONNECTOR;
  std::copy_n(connector ? connector_to_acceptor : acceptor_to_connector, kSessionKeyBytes,
              out.send.begin());
  std::copy_n(connector ? acceptor_to_connector : connector_to_acceptor, kSessionKeyBytes,
              out.receive.begin());
  sodium_memzero(shared, sizeof shared);
  sodium_memzero(cluster, sizeof cluster);
  sodium_memzero(keys, sizeof keys);
  sodium_memzero(&state, sizeof state);
  return out;
}

// Verifies the peer's proof (when keyed), its signature and the allow-list; refuses the
// peer (ERROR, throw) when any fails. `prover`: the peer's role.
void check_peer(Connection& connection, const AuthConfig& config, const Hello& peer,
                HandshakeRole prover, const Transcript& transcript) {
  if (config.key && (!peer.proof || !verify_proof(*config.key, prover, transcript, *peer.proof))) {
    refuse(connection, &peer, ErrorCode::AUTH_FAILED, "authentication failed",
           "peer failed to prove the cluster key (wrong key?)");
  }
  NodeId id{peer.node_id};
  if (!peer.signature ||
      !verify_signature(id, signed_message(prover, transcript), *peer.signature)) {
    refuse(connection, &peer, ErrorCode::AUTH_FAILED, "identity signature failed",
           "peer failed to sign the handshake with the identity it claims (" + id.to_text() + ")");
  }
  if (config.allowed_ids && !config.allowed_ids->contains(id)) {
    refuse(connection, &peer, ErrorCode::AUTH_FAILED,
           "node id " + id.to_text() + " is not on the peer's allow-list",
           "node id " + id.to_text() +
               " is not on this node's allow-list (--allow-ids); add it if the peer is yours");
  }
}

// What this end says in H1 or H2 (without proof and signature).
Hello own_hello(const AuthConfig& config, const NodeIdentity& identity, const Ephemeral& kx) {
  Hello hello{kProtocolVersion, mode_of(config), config.node_name, random_nonce(), std::nullopt};
  hello.encryption = encryption_of(config);
  hello.kx_public = kx.public_key;
  hello.node_id = identity.id().bytes;
  return hello;
}

void sign_hello(Hello& hello, const AuthConfig& config, const NodeIdentity& identity,
                HandshakeRole role, const Transcript& transcript) {
  if (config.key) hello.proof = compute_proof(*config.key, role, transcript);
  hello.signature = identity.sign(signed_message(role, transcript));
}

// The configured identity, or a fresh one kept in `fresh`.
const NodeIdentity& identity_of(const AuthConfig& config, std::optional<NodeIdentity>& fresh) {
  if (config.identity) return *config.identity;
  fresh.emplace(NodeIdentity::generate());
  return *fresh;
}

PeerIdentity peer_of(const AuthConfig& config, const Hello& peer, const Connection& connection) {
  return PeerIdentity{peer.node_name, config.key != nullptr, NodeId{peer.node_id},
                      connection.encrypted()};
}

}  // namespace

PeerIdentity handshake_connect(Connection& connection, const AuthConfig& config, Millis timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  std::optional<NodeIdentity> fresh;
  const NodeIdentity& identity = identity_of(config, fresh);
  Ephemeral kx;
  Hello hello = own_hello(config, identity, kx);
  send_message(connection, 0, hello);

  Hello reply = recv_hello(connection, nullptr, deadline, timeout);
  check_modes(connection, config, reply);
  const Transcript transcript = handshake_transcript(hello, reply);
  SessionKeys keys =
      derive_session_keys(connection, config, kx, reply, transcript, HandshakeRole::CONNECTOR);
  check_peer(connection, config, reply, HandshakeRole::ACCEPTOR, transcript);
  sign_hello(hello, config, identity, HandshakeRole::CONNECTOR, transcript);
  send_message(connection, 0, hello);
  if (!config.plaintext) connection.start_encryption(keys);
  sodium_memzero(&keys, sizeof keys);
  return peer_of(config, reply, connection);
}

PeerIdentity handshake_accept(Connection& connection, const AuthConfig& config, Millis timeout,
                              const std::function<void()>& heard_hello) {
  Clock::time_point deadline = Clock::now() + timeout;
  Hello first = recv_hello(connection, nullptr, deadline, timeout);
  check_modes(connection, config, first);
  if (heard_hello) heard_hello();
  std::optional<NodeIdentity> fresh;
  const NodeIdentity& identity = identity_of(config, fresh);
  Ephemeral kx;
  Hello reply = own_hello(config, identity, kx);
  const Transcript transcript = handshake_transcript(first, reply);
  SessionKeys keys =
      derive_session_keys(connection, config, kx, first, transcript, HandshakeRole::ACCEPTOR);
  sign_hello(reply, config, identity, HandshakeRole::ACCEPTOR, transcript);
  send_message(connection, 0, reply);

  Hello second = recv_hello(connection, &first, deadline, timeout);
  // The connector seals everything after H3, so this end's refusal below goes sealed.
  if (!config.plaintext) connection.start_encryption(keys);
  sodium_memzero(&keys, sizeof keys);
  if (core_bytes(second) != core_bytes(first)) {
    refuse(connection, &first, ErrorCode::PROTOCOL, "the second HELLO differs from the first",
           "its second HELLO differs from its first");
  }
  check_peer(connection, config, second, HandshakeRole::CONNECTOR, transcript);
  return peer_of(config, first, connection);
}

}  // namespace herd::net
