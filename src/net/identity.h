// Node identities: an Ed25519 keypair per node (or per user: every node started with the
// same config directory shares it), kept in a file so that the id a peer learns is the
// same every time. Each side of a handshake signs the transcript with its identity key
// (auth.h), so a peer learns an id it can check against an allow-list (allow_list.h).
//
// The id is the public key in URL-safe base64 without padding (43 characters): short
// enough to read out, paste into an allow-list, and grep for in logs.
//
// Identity file (text; mode 0600; created on first use by load_or_create):
//   # comment lines and blank lines are ignored
//   herd-identity-v1 ed25519 <64 hex digits: the 32-byte secret seed>
// Anything else is a corrupt file: a clear error, never silently replaced (a replaced
// identity would lock the node out of every allow-list that names it).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "net/frame.h"

namespace herd::net {

inline constexpr size_t kNodeIdBytes = 32;     // Ed25519 public key
inline constexpr size_t kSignatureBytes = 64;  // Ed25519 signature
inline constexpr size_t kNodeIdChars = 43;     // base64 (URL-safe, no padding) of 32 bytes
using Signature = std::array<uint8_t, kSignatureBytes>;

// A node's public identity: its Ed25519 public key.
struct NodeId {
  std::array<uint8_t, kNodeIdBytes> bytes{};

  // 43 characters of URL-safe base64, no padding.
  std::string to_text() const;
  // The inverse; throws herd::Error "[net] <origin>: '<text>' is not a node id ...".
  static NodeId from_text(std::string_view text, std::string_view origin);
  bool operator==(const NodeId&) const = default;
};

// The secret half. Move-only; the secret key is wiped when destroyed.
class NodeIdentity {
 public:
  // A fresh random identity (tests, and transports not given one).
  static NodeIdentity generate();
  // Parses the identity file format above. `origin` names the file in errors.
  static NodeIdentity from_text(std::string_view text, std::string_view origin);
  // The file's text for this identity (with a comment saying what it is).
  std::string to_text() const;

  // Reads the identity at `path`; if there is no file, creates one (and its directory)
  // with mode 0600, written to a temporary file and renamed so a crash never leaves half
  // a file. A file that exists but does not parse is an error naming the file; it is
  // never replaced.
  static NodeIdentity load_or_create(const std::filesystem::path& path);

  // $XDG_CONFIG_HOME/herd/identity, else $HOME/.config/herd/identity (macOS included).
  // The caller passes the environment's values (null: unset), so this reads no global
  // state. Throws herd::Error when neither is set.
  static std::filesystem::path default_path(const char* xdg_config_home, const char* home);

  NodeIdentity(NodeIdentity&& other) noexcept;
  NodeIdentity& operator=(NodeIdentity&& other) noexcept;
  NodeIdentity(const NodeIdentity&) = delete;
  NodeIdentity& operator=(const NodeIdentity&) = delete;
  ~NodeIdentity();

  const NodeId& id() const { return id_; }
  // Ed25519 signature of `message`.
  Signature sign(ConstBytes message) const;

 private:
  NodeIdentity() = default;
  static NodeIdentity from_seed(const uint8_t* seed);
  NodeId id_;
  std::array<uint8_t, 64> secret_{};  // libsodium's Ed25519 secret key: seed | public key
};

// True when `signature` is `id`'s Ed25519 signature of `message`.
bool verify_signature(const NodeId& id, ConstBytes message, const Signature& signature);

}  // namespace herd::net
