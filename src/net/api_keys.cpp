#include "net/api_keys.h"

#include <sodium.h>

#include <algorithm>

#include "net/secret_file.h"
#include "util/error.h"

namespace herd::net {
KeyDigest key_digest(std::string_view secret, std::string_view key) {
  if (secret.size() != kKeySecretBytes) {
    throw Error("net", "an API key secret must be " + std::to_string(kKeySecretBytes) +
                           " bytes, not " + std::to_string(secret.size()));
  }
  KeyDigest digest;
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(key.data()),
                                key.size());
  crypto_auth_hmacsha256_final(&state, digest.data());
  sodium_memzero(&state, sizeof state);
  return digest;
}

std::optional<std::string_view> bearer_key(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";  // the scheme is case-insensitive (RFC 7235)
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) {
      return std::nullopt;
    }
  }
  const std::string_view key = trim_line(authorization.substr(kScheme.size()));
  if (key.empty()) return std::nullopt;
  return key;
}

void check_key(std::string_view key, std::string_view origin) {
  if (key.empty() || key.size() > kMaxKeyChars) {
    throw Error("net", std::string(origin) + ": a key is 1 to " + std::to_string(kMaxKeyChars) +
                           " characters, this one " + std::to_string(key.size()));
  }
  for (const char c : key) {
    if (c <= 0x20 || c >= 0x7f) {
      throw Error("net", std::string(origin) +
                             ": a key is printable ASCII without spaces (it travels in an "
                             "HTTP header)");
    }
  }
}

std::vector<std::string> read_key_file(const std::filesystem::path& path) {
  const std::string origin = "key file '" + path.string() + "'";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("net", origin + ": is a folder");
  refuse_world_readable(path, origin);
  const std::optional<SecretText> text =
      read_secret_file(path, origin, kMaxKeyFileBytes, "not a key file (one key a line)");
  if (!text) throw Error("net", origin + ": cannot be read");
  std::vector<std::string> keys;
  std::string_view rest = text->view();
  for (size_t line = 1; !rest.empty(); ++line) {
    const size_t end = rest.find('\n');
    const std::string_view key = trim_line(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (key.empty() || key.front() == '#') continue;
    check_key(key, origin + ", line " + std::to_string(line));
    keys.emplace_back(key);
  }
  if (keys.empty()) throw Error("net", origin + ": holds no key (one key a line; # comments)");
  return keys;
}

ApiKeys::ApiKeys() {
  ensure_sodium();
  randombytes_buf(secret_.data(), secret_.size());
}

ApiKeys::ApiKeys(std::string_view secret) {
  ensure_sodium();
  if (secret.size() != kKeySecretBytes) {
    throw Error("net", "an API key secret must be " + std::to_string(kKeySecretBytes) +
                           " bytes, not " + std::to_string(secret.size()));
  }
  std::copy(secret.begin(), secret.end(), secret_.begin());
}

ApiKeys::~ApiKeys() {
  sodium_memzero(secret_.data(), secret_.size());
}

void ApiKeys::add(std::string_view key, std::string_view origin) {
  check_key(key, origin);
  const KeyDigest digest = key_digest(
      std::string_view(reinterpret_cast<const char*>(secret_.data()), secret_.size()), key);
  if (added_.insert(digest).second) digests_.push_back(digest);
}

std::optional<KeyDigest> ApiKeys::find(std::string_view key) const {
  const KeyDigest given = key_digest(
      std::string_view(reinterpret_cast<const char*>(secret_.data()), secret_.size()), key);
  // Every digest is compared, whichever matched: the time says nothing of which one did.
  int matched = 0;
  for (const KeyDigest& digest : digests_) {
    matched |= static_cast<int>(crypto_verify_32(given.data(), digest.data()) == 0);
  }
  if (matched == 0) return std::nullopt;
  return given;
}

}  // namespace herd::net
