// API keys (issue 28): the keys `herd serve` and `herd hub` accept in
// `Authorization: Bearer KEY`, given on the command line (--api-key: visible to every user
// in the process list) or in a key file (--api-key-file), held as HMAC-SHA256 digests under
// a secret and looked up in constant time.
//
// Key file (text; not readable by every user; at most kMaxKeyFileBytes):
//   # comment lines and blank lines are ignored; spaces around a key are trimmed
//   sk-first-key
//   sk-second-key
// A key is 1 to kMaxKeyChars printable ASCII characters without spaces (what an HTTP header
// carries). A file that cannot be read, that every user may read, or that holds no key is an
// error naming it; so is a line that is not a key (named by its number, never its text).
//
// Lookup: the given key's HMAC under the set's secret is compared with every stored digest
// (crypto_verify_32), with no early exit. Its time depends on the number of keys and the
// given key's length only: neither the content nor the length of a stored key, nor which
// one matched, shows in it. The digests name keys without holding them: the hub's account
// names are these digests under its own secret (hub/hub_keys.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace herd::net {

inline constexpr size_t kKeySecretBytes = 32;
inline constexpr size_t kMaxKeyChars = 512;
inline constexpr size_t kMaxKeyFileBytes = size_t{1} << 20;
using KeyDigest = std::array<uint8_t, 32>;  // HMAC-SHA256

// HMAC-SHA256(secret, key). REQUIRES: secret.size() == kKeySecretBytes.
KeyDigest key_digest(std::string_view secret, std::string_view key);

// The KEY of an `Authorization: Bearer KEY` header; nullopt when it is not one.
std::optional<std::string_view> bearer_key(std::string_view authorization);

// Throws herd::Error "[net] <origin>: ..." when `key` is not a key (the format above); the
// message never shows the key.
void check_key(std::string_view key, std::string_view origin);

// The keys of a key file (format above). Throws herd::Error "[net] key file 'PATH': ..."
// when it cannot be read, every user may read it, it holds no key or a line is no key.
std::vector<std::string> read_key_file(const std::filesystem::path& path);

class ApiKeys {
 public:
  // Keys digested under a random secret (their digests mean nothing outside this object).
  ApiKeys();
  // REQUIRES: secret.size() == kKeySecretBytes.
  explicit ApiKeys(std::string_view secret);
  ~ApiKeys();
  ApiKeys(ApiKeys&&) = default;
  ApiKeys& operator=(ApiKeys&&) = default;
  ApiKeys(const ApiKeys&) = delete;
  ApiKeys& operator=(const ApiKeys&) = delete;

  // Adds a key (check_key() first: `origin` names where it came from). A key given twice is
  // kept once.
  void add(std::string_view key, std::string_view origin);
  bool empty() const { return digests_.empty(); }
  size_t size() const { return digests_.size(); }
  // The digest of the stored key equal to `key`, in constant time (above); nullopt when
  // none is.
  std::optional<KeyDigest> find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key).has_value(); }
  // Every stored key's digest, in the order they were added.
  const std::vector<KeyDigest>& digests() const { return digests_; }

 private:
  std::array<uint8_t, kKeySecretBytes> secret_{};
  std::vector<KeyDigest> digests_;
  std::set<KeyDigest> added_;  // to keep a key given twice once (loading is not timed)
};

}  // namespace herd::net
