#include "net/identity.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "net/secret_file.h"
#include "util/error.h"

namespace herd::net {

namespace {

constexpr std::string_view kFileTag = "herd-identity-v1";
constexpr std::string_view kAlgorithm = "ed25519";
constexpr size_t kMaxFileBytes = 4096;

// The next space-separated word of `line` (consumed), or empty.
std::string_view next_word(std::string_view& line) {
  line = trim_line(line);
  size_t end = 0;
  while (end < line.size() && !is_line_space(line[end])) ++end;
  std::string_view word = line.substr(0, end);
  line.remove_prefix(end);
  return word;
}

// For errors: at most 60 characters, control bytes shown as '?'.
std::string shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 60)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 60) out += "...";
  return out;
}

}  // namespace

// ---- NodeId ----

std::string NodeId::to_text() const {
  char text[sodium_base64_ENCODED_LEN(kNodeIdBytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(text, sizeof text, bytes.data(), bytes.size(),
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return text;
}

NodeId NodeId::from_text(std::string_view text, std::string_view origin) {
  NodeId id;
  size_t n = 0;
  const char* end = nullptr;
  const bool ok =
      text.size() == kNodeIdChars &&
      sodium_base642bin(id.bytes.data(), id.bytes.size(), text.data(), text.size(), nullptr, &n,
                        &end, sodium_base64_VARIANT_URLSAFE_NO_PADDING) == 0 &&
      n == kNodeIdBytes && end == text.data() + text.size();
  if (!ok) {
    throw Error("net", std::string(origin) + ": '" + shown(text) + "' is not a node id (" +
                           std::to_string(kNodeIdChars) +
                           " characters of URL-safe base64, as `herd node --show-id` prints)");
  }
  return id;
}

// ---- NodeIdentity ----

NodeIdentity NodeIdentity::from_seed(const uint8_t* seed) {
  ensure_sodium();
  NodeIdentity identity;
  crypto_sign_seed_keypair(identity.id_.bytes.data(), identity.secret_.data(), seed);
  return identity;
}

NodeIdentity NodeIdentity::generate() {
  ensure_sodium();
  uint8_t seed[crypto_sign_SEEDBYTES];
  randombytes_buf(seed, sizeof seed);
  NodeIdentity identity = from_seed(seed);
  sodium_memzero(seed, sizeof seed);
  return identity;
}

NodeIdentity NodeIdentity::from_text(std::string_view text, std::string_view origin) {
  auto corrupt = [&](const std::string& why) {
    return Error("net", std::string(origin) + ": not a herd identity file (" + why +
                            "); it is left as it is: move it away to make a new identity, "
                            "which peers' allow-lists will not know");
  };
  static_assert(crypto_sign_SEEDBYTES == 32);
  std::optional<std::array<uint8_t, 32>> seed;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    line = trim_line(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string at = "line " + std::to_string(line_no);
    if (seed) throw corrupt(at + ": a second key");
    if (next_word(line) != kFileTag) {
      throw corrupt(at + ": expected '" + std::string(kFileTag) + " " + std::string(kAlgorithm) +
                    " <64 hex digits>'");
    }
    if (next_word(line) != kAlgorithm) throw corrupt(at + ": unknown key type");
    std::string_view hex = next_word(line);
    if (!trim_line(line).empty()) throw corrupt(at + ": text after the key");
    std::array<uint8_t, 32> bytes;
    size_t n = 0;
    const char* end = nullptr;
    if (hex.size() != 64 ||
        sodium_hex2bin(bytes.data(), bytes.size(), hex.data(), hex.size(), nullptr, &n, &end) !=
            0 ||
        n != bytes.size() || end != hex.data() + hex.size()) {
      sodium_memzero(bytes.data(), bytes.size());
      throw corrupt(at + ": the key is not 64 hex digits");
    }
    seed = bytes;
    sodium_memzero(bytes.data(), bytes.size());
  }
  if (!seed) throw corrupt("no key in it");
  NodeIdentity identity = from_seed(seed->data());
  sodium_memzero(seed->data(), seed->size());
  return identity;
}

std::string NodeIdentity::to_text() const {
  char hex[2 * crypto_sign_SEEDBYTES + 1];
  sodium_bin2hex(hex, sizeof hex, secret_.data(), crypto_sign_SEEDBYTES);
  std::string text =
      "# herd node identity (Ed25519). Secret: do not share this file.\n"
      "# Its id: " +
      id_.to_text() + "\n" + std::string(kFileTag) + " " + std::string(kAlgorithm) + " " + hex +
      "\n";
  sodium_memzero(hex, sizeof hex);
  return text;
}

NodeIdentity NodeIdentity::load_or_create(const std::filesystem::path& path) {
  const std::string origin = "identity file '" + path.string() + "'";
  // Read it if it is there. A node starting beside another may fail to open the file just
  // before the other links it into place (seen with 16 nodes starting at once): when it is
  // there after all, read again; only a file that stays unreadable is an error.
  std::error_code ec;
  for (int attempt = 0;; ++attempt) {
    if (const std::optional<SecretText> text =
            read_secret_file(path, origin, kMaxFileBytes, "not a herd identity file")) {
      return from_text(text->view(), origin);
    }
    if (!std::filesystem::exists(path, ec)) break;
    if (attempt == 2) throw Error("net", origin + ": cannot read it");
  }

  // First use: a new identity, created whole; when another process created the file
  // meanwhile, its identity wins.
  NodeIdentity identity = generate();
  std::string text = identity.to_text();
  bool created = false;
  try {
    created = create_secret_file(path, text, origin);
  } catch (...) {
    sodium_memzero(text.data(), text.size());
    throw;
  }
  sodium_memzero(text.data(), text.size());
  if (!created) return load_or_create(path);
  return identity;
}

std::filesystem::path NodeIdentity::default_path(const char* xdg_config_home, const char* home) {
  if (xdg_config_home != nullptr && xdg_config_home[0] == '/') {
    return std::filesystem::path(xdg_config_home) / "herd" / "identity";
  }
  if (home != nullptr && home[0] != '\0') {
    return std::filesystem::path(home) / ".config" / "herd" / "identity";
  }
  throw Error("net",
              "no place for this node's identity: neither XDG_CONFIG_HOME nor HOME is set "
              "(or give --identity FILE)");
}

NodeIdentity::NodeIdentity(NodeIdentity&& other) noexcept : id_(other.id_), secret_(other.secret_) {
  sodium_memzero(other.secret_.data(), other.secret_.size());
}

NodeIdentity& NodeIdentity::operator=(NodeIdentity&& other) noexcept {
  if (this != &other) {
    id_ = other.id_;
    secret_ = other.secret_;
    sodium_memzero(other.secret_.data(), other.secret_.size());
  }
  return *this;
}

NodeIdentity::~NodeIdentity() {
  sodium_memzero(secret_.data(), secret_.size());
}

Signature NodeIdentity::sign(ConstBytes message) const {
  Signature signature;
  crypto_sign_detached(signature.data(), nullptr, message.data(), message.size(), secret_.data());
  return signature;
}

bool verify_signature(const NodeId& id, ConstBytes message, const Signature& signature) {
  ensure_sodium();
  return crypto_sign_verify_detached(signature.data(), message.data(), message.size(),
                                     id.bytes.data()) == 0;
}

}  // namespace herd::net
