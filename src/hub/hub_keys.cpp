#include "hub/hub_keys.h"

#include <sodium.h>

#include <system_error>

#include "hub/credits.h"
#include "net/secret_file.h"
#include "util/error.h"

namespace herd::hub {
namespace {

constexpr std::string_view kFileTag = "herd-hub-secret-v1";
constexpr size_t kMaxFileBytes = 4096;

// The secret of a secret file's text (format in hub_keys.h); throws naming `origin`.
std::string parse_secret(std::string_view text, const std::string& origin) {
  std::string secret;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const size_t hex_chars = 2 * net::kKeySecretBytes;
    if (!secret.empty() || line.size() != kFileTag.size() + 1 + hex_chars ||
        line.substr(0, kFileTag.size()) != kFileTag || line[kFileTag.size()] != ' ') {
      sodium_memzero(secret.data(), secret.size());
      throw Error("hub", origin + ": not a herd hub secret file (one line '" +
                             std::string(kFileTag) + " <64 hex digits>')");
    }
    secret.resize(net::kKeySecretBytes);
    size_t decoded = 0;
    if (sodium_hex2bin(reinterpret_cast<unsigned char*>(secret.data()), secret.size(),
                       line.data() + kFileTag.size() + 1, hex_chars, nullptr, &decoded,
                       nullptr) != 0 ||
        decoded != net::kKeySecretBytes) {
      sodium_memzero(secret.data(), secret.size());
      throw Error("hub", origin + ": its secret is not 64 hex digits");
    }
  }
  if (secret.empty()) throw Error("hub", origin + ": holds no secret");
  return secret;
}

}  // namespace

std::string load_or_create_hub_secret(const std::filesystem::path& path) {
  if (sodium_init() < 0) throw Error("hub", "libsodium failed to initialise");
  const std::string origin = "hub secret file '" + path.string() + "'";
  std::error_code ec;
  // As a node identity (net/identity.cpp): a hub starting beside another may find the file
  // missing just before the other links it into place, so read, create, read again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (std::filesystem::exists(path, ec)) {
      net::refuse_world_readable(path, origin);
      const std::optional<net::SecretText> text =
          net::read_secret_file(path, origin, kMaxFileBytes, "not a herd hub secret file");
      if (!text) throw Error("hub", origin + ": cannot read it");
      return parse_secret(text->view(), origin);
    }
    unsigned char secret[net::kKeySecretBytes];
    randombytes_buf(secret, sizeof secret);
    char hex[2 * net::kKeySecretBytes + 1];
    sodium_bin2hex(hex, sizeof hex, secret, sizeof secret);
    std::string text =
        "# herd hub secret: clients' account names are HMACs of their API keys under it.\n"
        "# Keep it private and keep it: a new secret renames every account. Every replica of\n"
        "# a hub needs the same one.\n" +
        std::string(kFileTag) + " " + hex + "\n";
    bool created = false;
    try {
      created = net::create_secret_file(path, text, origin);
    } catch (...) {
      sodium_memzero(text.data(), text.size());
      sodium_memzero(hex, sizeof hex);
      sodium_memzero(secret, sizeof secret);
      throw;
    }
    std::string result;
    if (created) result.assign(reinterpret_cast<const char*>(secret), sizeof secret);
    sodium_memzero(text.data(), text.size());
    sodium_memzero(hex, sizeof hex);
    sodium_memzero(secret, sizeof secret);
    if (created) return result;
  }
  throw Error("hub", origin + ": cannot read it");
}

std::filesystem::path default_hub_secret_path(const char* xdg_data_home, const char* home) {
  if (xdg_data_home != nullptr && xdg_data_home[0] == '/') {
    return std::filesystem::path(xdg_data_home) / "herd" / "hub.secret";
  }
  if (home != nullptr && home[0] != '\0') {
    return std::filesystem::path(home) / ".local" / "share" / "herd" / "hub.secret";
  }
  throw Error("hub", "no place for the hub's secret: give --secret-file PATH");
}

HubKeys::HubKeys(std::string_view secret, const std::vector<std::string>& client_keys,
                 const std::vector<std::string>& operator_keys)
    : clients_(secret.empty() ? net::ApiKeys() : net::ApiKeys(secret)) {
  for (const std::string& key : client_keys) clients_.add(key, "a client key");
  for (const std::string& key : operator_keys) operators_.add(key, "an operator key");
}

std::optional<std::string> HubKeys::client_account(std::string_view authorization) const {
  if (open()) return std::string("client:open");
  const std::optional<std::string_view> key = net::bearer_key(authorization);
  if (!key) return std::nullopt;
  const std::optional<net::KeyDigest> digest = clients_.find(*key);
  if (!digest) return std::nullopt;
  return Credits::client_account(*digest);
}

std::vector<std::string> HubKeys::accounts() const {
  std::vector<std::string> out;
  for (const net::KeyDigest& digest : clients_.digests()) {
    out.push_back(Credits::client_account(digest));
  }
  return out;
}

std::optional<HubKeys::Refusal> HubKeys::ledger_refusal(std::string_view authorization,
                                                        std::string_view account) const {
  const std::optional<std::string_view> key = net::bearer_key(authorization);
  if (key && operators_.contains(*key)) return std::nullopt;
  if (key && !open()) {
    if (const std::optional<net::KeyDigest> digest = clients_.find(*key)) {
      const std::string own = Credits::client_account(*digest);
      if (account == own) return std::nullopt;
      return Refusal{403,
                     "a client key may read only its own account's history "
                     "(/api/ledger?account=" +
                         own + "); the rest of the ledger needs the operator key"};
    }
  }
  if (operators_.empty()) {
    return Refusal{403,
                   "this hub has no operator key (herd hub --operator-key-file): its "
                   "ledger is shown to no one"};
  }
  return Refusal{401, key ? "the key is not an operator key"
                          : "the operator key is required (Authorization: Bearer KEY)"};
}

}  // namespace herd::hub
