#include "net/auth.h"

#include <sodium.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "util/error.h"

namespace herd::net {

namespace {

void ensure_sodium() {
  // sodium_init is idempotent and thread-safe; 1 means "already initialised".
  if (sodium_init() < 0) throw Error("net", "libsodium failed to initialise");
}

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
  std::string origin = "key file '" + path + "'";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("net", origin + ": cannot open it");
  std::string text;
  char buffer[1024];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) {
      sodium_memzero(text.data(), text.size());
      throw Error("net", origin + ": larger than " + std::to_string(kMaxFileBytes) +
                             " bytes; is this really a key?");
    }
  }
  sodium_memzero(buffer, sizeof buffer);
  try {
    ClusterKey key = from_text(text, origin);
    sodium_memzero(text.data(), text.size());
    return key;
  } catch (...) {
    sodium_memzero(text.data(), text.size());
    throw;
  }
}

std::optional<ClusterKey> resolve_cluster_key(std::string_view key_file, const char* herd_key_env) {
  if (!key_file.empty()) return ClusterKey::load_file(std::string(key_file));
  if (herd_key_env != nullptr && herd_key_env[0] != '\0') {
    return ClusterKey::from_text(herd_key_env, "HERD_KEY");
  }
  return std::nullopt;
}

// ---- proofs ----

Nonce random_nonce() {
  ensure_sodium();
  Nonce nonce;
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

Proof compute_proof(const ClusterKey& key, HandshakeRole prover, const Nonce& verifier_nonce,
                    const Nonce& prover_nonce, std::string_view prover_name) {
  ensure_sodium();
  static constexpr std::string_view kDomain = "herd-hello-v1";
  std::string_view label = role_label(prover);
  uint8_t name_length[4];
  uint32_t n = static_cast<uint32_t>(prover_name.size());
  for (int i = 0; i < 4; ++i) name_length[i] = static_cast<uint8_t>(n >> (8 * i));

  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, key.bytes().data(), key.bytes().size());
  auto update = [&](const void* p, size_t size) {
    crypto_auth_hmacsha256_update(&state, static_cast<const unsigned char*>(p), size);
  };
  update(kDomain.data(), kDomain.size());
  update(label.data(), label.size());
  update(verifier_nonce.data(), verifier_nonce.size());
  update(prover_nonce.data(), prover_nonce.size());
  update(name_length, sizeof name_length);
  update(prover_name.data(), prover_name.size());
  Proof proof;
  crypto_auth_hmacsha256_final(&state, proof.data());
  sodium_memzero(&state, sizeof state);
  return proof;
}

bool verify_proof(const ClusterKey& key, HandshakeRole prover, const Nonce& verifier_nonce,
                  const Nonce& prover_nonce, std::string_view prover_name, const Proof& proof) {
  Proof expected = compute_proof(key, prover, verifier_nonce, prover_nonce, prover_name);
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

void check_version(Connection& connection, const Hello& hello) {
  if (hello.protocol_version != kProtocolVersion) {
    std::string why = "peer speaks protocol version " + std::to_string(hello.protocol_version) +
                      ", this node " + std::to_string(kProtocolVersion);
    refuse(connection, &hello, ErrorCode::VERSION, why, why);
  }
}

AuthMode mode_of(const AuthConfig& config) {
  return config.key ? AuthMode::HMAC_SHA256 : AuthMode::NONE;
}

}  // namespace

PeerIdentity handshake_connect(Connection& connection, const AuthConfig& config, Millis timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  Nonce own_nonce = random_nonce();
  Hello hello{kProtocolVersion, mode_of(config), config.node_name, own_nonce, std::nullopt};
  send_message(connection, 0, hello);

  Hello reply = recv_hello(connection, nullptr, deadline, timeout);
  check_version(connection, reply);
  if (!config.key) {
    if (reply.auth == AuthMode::HMAC_SHA256) {
      refuse(connection, &reply, ErrorCode::AUTH_FAILED, "this node has no cluster key",
             "peer requires a cluster key; give --key FILE or HERD_KEY");
    }
    return PeerIdentity{reply.node_name, false};
  }
  if (reply.auth != AuthMode::HMAC_SHA256 || !reply.proof) {
    refuse(connection, &reply, ErrorCode::AUTH_REQUIRED, "this node requires a cluster key",
           "peer has no cluster key and cannot prove its identity");
  }
  if (!verify_proof(*config.key, HandshakeRole::ACCEPTOR, own_nonce, reply.nonce, reply.node_name,
                    *reply.proof)) {
    refuse(connection, &reply, ErrorCode::AUTH_FAILED, "authentication failed",
           "peer failed to prove the cluster key (wrong key?)");
  }
  hello.proof = compute_proof(*config.key, HandshakeRole::CONNECTOR, reply.nonce, own_nonce,
                              config.node_name);
  send_message(connection, 0, hello);
  return PeerIdentity{reply.node_name, true};
}

PeerIdentity handshake_accept(Connection& connection, const AuthConfig& config, Millis timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  Hello first = recv_hello(connection, nullptr, deadline, timeout);
  check_version(connection, first);
  if (config.key && first.auth != AuthMode::HMAC_SHA256) {
    refuse(connection, &first, ErrorCode::AUTH_REQUIRED,
           "this node requires a cluster key (--key FILE or HERD_KEY)",
           "peer offered no cluster key");
  }
  if (!config.key && first.auth == AuthMode::HMAC_SHA256) {
    refuse(connection, &first, ErrorCode::AUTH_FAILED,
           "this node has no cluster key and cannot prove one; start it with --key",
           "peer requires a cluster key, which this node lacks");
  }
  Nonce own_nonce = random_nonce();
  Hello reply{kProtocolVersion, mode_of(config), config.node_name, own_nonce, std::nullopt};
  if (config.key) {
    reply.proof = compute_proof(*config.key, HandshakeRole::ACCEPTOR, first.nonce, own_nonce,
                                config.node_name);
  }
  send_message(connection, 0, reply);
  if (!config.key) return PeerIdentity{first.node_name, false};

  Hello second = recv_hello(connection, &first, deadline, timeout);
  bool same_peer = second.node_name == first.node_name && second.nonce == first.nonce;
  if (!same_peer || !second.proof ||
      !verify_proof(*config.key, HandshakeRole::CONNECTOR, own_nonce, first.nonce, first.node_name,
                    *second.proof)) {
    refuse(connection, &first, ErrorCode::AUTH_FAILED, "authentication failed",
           "peer failed to prove the cluster key (wrong key?)");
  }
  return PeerIdentity{first.node_name, true};
}

}  // namespace herd::net
