// The pure half of discovery: the cluster id and the TXT record codec. The DNS-SD calls
// are in dns_sd.cpp (or dns_sd_none.cpp in a build without the library).
#include "net/discovery.h"

#include <sodium.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string_view>

#include "net/messages.h"
#include "util/error.h"

namespace herd::net {

namespace {

// Why a fixed context: the id is a MAC of this string under the key, so it is tied to
// discovery and reveals nothing about the key or about proofs made with it elsewhere.
constexpr std::string_view kClusterIdContext = "herd-cluster-id-v1";
constexpr size_t kClusterIdBytes = 8;

bool is_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  HERD_CHECK(s.size() <= kMaxTxtStringBytes);
  out.push_back(static_cast<uint8_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

Error txt_error(const std::string& what) {
  return Error("net", "TXT record: " + what);
}

uint64_t parse_u64(std::string_view key, std::string_view value) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size())
    throw txt_error("'" + std::string(key) + "' is not a number");
  return v;
}

double parse_gbs(std::string_view key, std::string_view value) {
  // Digits with at most one '.', read by hand: from_chars for double is missing in libc++ 14.
  double whole = 0, scale = 1;
  bool dot = false, digit = false;
  for (char c : value) {
    if (c == '.' && !dot) {
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digit = true;
      if (dot) {
        scale /= 10;
        whole += (c - '0') * scale;
      } else {
        whole = whole * 10 + (c - '0');
      }
    } else {
      throw txt_error("'" + std::string(key) + "' is not a number");
    }
  }
  if (!digit || value.size() > 24) throw txt_error("'" + std::string(key) + "' is not a number");
  return whole;
}

}  // namespace

std::string cluster_id(const ClusterKey* key) {
  if (!key) return "none";
  if (sodium_init() < 0) throw Error("net", "libsodium failed to initialise");
  const ConstBytes k = key->bytes();
  std::array<uint8_t, kClusterIdBytes> id{};
  // crypto_generichash takes keys of 16..64 bytes; longer keys are hashed down first.
  std::array<uint8_t, crypto_generichash_KEYBYTES_MAX> short_key{};
  ConstBytes mac_key = k;
  if (k.size() > crypto_generichash_KEYBYTES_MAX) {
    crypto_generichash(short_key.data(), short_key.size(), k.data(), k.size(), nullptr, 0);
    mac_key = short_key;
  }
  crypto_generichash(id.data(), id.size(),
                     reinterpret_cast<const uint8_t*>(kClusterIdContext.data()),
                     kClusterIdContext.size(), mac_key.data(), mac_key.size());
  sodium_memzero(short_key.data(), short_key.size());
  std::string hex(2 * id.size() + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), id.data(), id.size());
  hex.pop_back();
  return hex;
}

std::vector<uint8_t> encode_txt(const NodeAdvert& a) {
  std::vector<uint8_t> out;
  put_string(out, "txtvers=1");
  put_string(out, "v=" + std::to_string(a.version));
  put_string(out, "name=" + a.name.substr(0, kMaxNodeNameBytes));
  put_string(out, "cluster=" + a.cluster.substr(0, 64));
  put_string(out, "cores=" + std::to_string(a.cores));
  put_string(out, "mem=" + std::to_string(a.free_memory_bytes));
  char bw[32];
  std::snprintf(bw, sizeof bw, "%.2f",
                a.bandwidth_gbs > 0 && a.bandwidth_gbs < 1e12 ? a.bandwidth_gbs : 0.0);
  put_string(out, std::string("bw=") + bw);
  std::string models = "models=";
  bool first = true;
  for (const std::string& m : a.models) {
    const std::string h = m.substr(0, kModelHashPrefixChars);
    if (models.size() + (first ? 0 : 1) + h.size() > kMaxTxtStringBytes) break;
    if (!first) models += ',';
    models += h;
    first = false;
  }
  put_string(out, models);
  put_string(out, "n_models=" + std::to_string(std::max<uint64_t>(a.n_models, a.models.size())));
  if (!a.id.empty()) put_string(out, "id=" + a.id.substr(0, kNodeIdChars));
  return out;
}

NodeAdvert decode_txt(ConstBytes txt) {
  NodeAdvert a;
  std::optional<std::string> version, name, cluster;
  std::vector<std::string> seen;
  size_t at = 0;
  while (at < txt.size()) {
    const size_t n = txt[at++];
    if (n > txt.size() - at)
      throw txt_error("a string of " + std::to_string(n) + " bytes overruns the record");
    const std::string_view s(reinterpret_cast<const char*>(txt.data() + at), n);
    at += n;
    if (s.empty()) continue;  // an empty TXT record is one empty string
    const size_t eq = s.find('=');
    std::string key(s.substr(0, eq));
    for (char& c : key) c = lower(c);
    if (key.empty()) throw txt_error("a string without a key");
    bool repeated = false;
    for (const std::string& k : seen) repeated = repeated || k == key;
    if (repeated) continue;  // RFC 6763 6.4: only the first counts
    seen.push_back(key);
    if (eq == std::string_view::npos) continue;  // a boolean attribute: none are defined
    const std::string_view value = s.substr(eq + 1);
    if (key == "v") {
      const uint64_t v = parse_u64(key, value);
      if (v > 0xffff) throw txt_error("version " + std::string(value) + " out of range");
      a.version = static_cast<uint32_t>(v);
      version = std::string(value);
    } else if (key == "name") {
      if (value.empty() || value.size() > kMaxNodeNameBytes || !is_printable(value))
        throw txt_error("name is not 1.." + std::to_string(kMaxNodeNameBytes) +
                        " printable characters");
      name = std::string(value);
    } else if (key == "cluster") {
      if (value != "none" && (value.size() != 2 * kClusterIdBytes || !is_hex(value)))
        throw txt_error("cluster is neither 16 hex digits nor 'none'");
      cluster = std::string(value);
    } else if (key == "cores") {
      const uint64_t v = parse_u64(key, value);
      if (v > (1u << 20)) throw txt_error("cores " + std::string(value) + " out of range");
      a.cores = static_cast<int64_t>(v);
    } else if (key == "mem") {
      a.free_memory_bytes = parse_u64(key, value);
    } else if (key == "bw") {
      a.bandwidth_gbs = parse_gbs(key, value);
    } else if (key == "id") {
      try {
        a.id = NodeId::from_text(value, "TXT record").to_text();
      } catch (const Error&) {
        throw txt_error("id is not a node id (43 characters of URL-safe base64)");
      }
    } else if (key == "n_models") {
      a.n_models = parse_u64(key, value);
    } else if (key == "models") {
      size_t from = 0;
      while (from < value.size()) {
        size_t comma = value.find(',', from);
        if (comma == std::string_view::npos) comma = value.size();
        const std::string_view h = value.substr(from, comma - from);
        if (h.size() != kModelHashPrefixChars || !is_hex(h))
          throw txt_error("models: '" + std::string(h.substr(0, 32)) + "' is not a hash");
        a.models.emplace_back(h);
        from = comma + 1;
      }
    }
  }
  if (!version) throw txt_error("no version (v=)");
  if (!name) throw txt_error("no name");
  if (!cluster) throw txt_error("no cluster id");
  a.name = *name;
  a.cluster = *cluster;
  a.n_models = std::max<uint64_t>(a.n_models, a.models.size());
  return a;
}

}  // namespace herd::net
