#include "hub/registration.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hub/pod_address.h"
#include "util/error.h"

namespace herd::hub {
namespace {

constexpr std::string_view kSignedPrefix = "herd-registration-v1\n";
constexpr size_t kMaxModels = 64;

[[noreturn]] void bad(std::string_view field, const std::string& problem) {
  throw Error("hub", "registration: field '" + std::string(field) + "': " + problem);
}

const nlohmann::json& field(const nlohmann::json& j, std::string_view name) {
  auto it = j.find(name);
  if (it == j.end()) bad(name, "missing");
  return *it;
}

// Printable ASCII or UTF-8 bytes, no controls; 1..max bytes.
std::string text_field(const nlohmann::json& j, std::string_view name, size_t max,
                       bool allow_space = true) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_string()) bad(name, "not a string");
  std::string s = v.get<std::string>();
  if (s.empty() || s.size() > max) {
    bad(name, std::to_string(s.size()) + " bytes (1-" + std::to_string(max) + ")");
  }
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || (!allow_space && c == ' ')) {
      bad(name, "holds a control character or space");
    }
  }
  return s;
}

int64_t int_field(const nlohmann::json& j, std::string_view name, int64_t lo, int64_t hi) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_number_integer()) bad(name, "not an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    bad(name, "out of range");
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    bad(name, std::to_string(x) + " is not in " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return x;
}

double rate_field(const nlohmann::json& j, std::string_view name, double hi) {
  const nlohmann::json& v = field(j, name);
  if (!v.is_number()) bad(name, "not a number");
  const double x = v.get<double>();
  if (!(x > 0) || !(x <= hi)) bad(name, "not in (0, " + std::to_string(hi) + "]");
  return x;
}

// "loadable": model names as "models" names them, 0..kMaxModels, no repeats.
std::vector<std::string> loadable_field(const nlohmann::json& j) {
  const nlohmann::json& names = j["loadable"];
  if (!names.is_array()) bad("loadable", "not an array");
  if (names.size() > kMaxModels) {
    bad("loadable",
        std::to_string(names.size()) + " models (at most " + std::to_string(kMaxModels) + ")");
  }
  std::vector<std::string> out;
  for (const nlohmann::json& name : names) {
    const std::string s = text_field(nlohmann::json{{"loadable", name}}, "loadable", 256);
    if (std::find(out.begin(), out.end(), s) != out.end()) bad("loadable", "'" + s + "' twice");
    out.push_back(s);
  }
  return out;
}

std::vector<uint8_t> signed_bytes(std::string_view body) {
  std::string text;
  text.reserve(kSignedPrefix.size() + body.size());
  text.append(kSignedPrefix).append(body);
  return std::vector<uint8_t>(text.begin(), text.end());
}

}  // namespace

std::string registration_body(const Registration& r) {
  nlohmann::json models = nlohmann::json::array();
  for (const ServedModel& m : r.models) models.push_back({{"name", m.name}, {"n_ctx", m.n_ctx}});
  const nlohmann::json j = {{"id", r.id.to_text()},
                            {"name", r.name},
                            {"url", r.url},
                            {"models", models},
                            {"slots", r.slots},
                            {"decode_tokens_per_s", r.decode_tokens_per_s},
                            {"prefill_tokens_per_s", r.prefill_tokens_per_s},
                            {"memory_bytes", r.memory_bytes},
                            {"time_ms", r.time_ms}};
  if (r.loadable.empty()) return j.dump();  // absent: the body of a pod that loads nothing
  nlohmann::json with = j;
  with["loadable"] = r.loadable;
  return with.dump();
}

std::string sign_registration(const net::NodeIdentity& identity, std::string_view body) {
  const std::vector<uint8_t> message = signed_bytes(body);
  const net::Signature signature = identity.sign(message);
  char text[sodium_base64_ENCODED_LEN(net::kSignatureBytes,
                                      sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(text, sizeof text, signature.data(), signature.size(),
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return text;
}

Registration parse_registration(std::string_view body) {
  if (body.size() > kMaxRegistrationBytes) {
    throw Error("hub", "registration: " + std::to_string(body.size()) + " bytes is more than " +
                           std::to_string(kMaxRegistrationBytes));
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error("hub", "registration: not JSON");
  if (!j.is_object()) throw Error("hub", "registration: not a JSON object");
  Registration r;
  r.id = net::NodeId::from_text(text_field(j, "id", net::kNodeIdChars, false), "registration");
  r.name = text_field(j, "name", 128);
  r.url = text_field(j, "url", 2048, false);
  parse_pod_url(r.url);  // scheme, host and port (pod_address.h)
  const nlohmann::json& models = field(j, "models");
  if (!models.is_array()) bad("models", "not an array");
  if (models.empty() || models.size() > kMaxModels) {
    bad("models", std::to_string(models.size()) + " models (1-" + std::to_string(kMaxModels) + ")");
  }
  for (const nlohmann::json& m : models) {
    if (!m.is_object()) bad("models", "an entry is not an object");
    ServedModel served{text_field(m, "name", 256), int_field(m, "n_ctx", 1, int64_t{1} << 24)};
    for (const ServedModel& before : r.models) {
      if (before.name == served.name) bad("models", "'" + served.name + "' twice");
    }
    r.models.push_back(std::move(served));
  }
  r.slots = static_cast<int32_t>(int_field(j, "slots", 1, 4096));
  r.decode_tokens_per_s = rate_field(j, "decode_tokens_per_s", 1e6);
  r.prefill_tokens_per_s = rate_field(j, "prefill_tokens_per_s", 1e7);
  r.memory_bytes = static_cast<uint64_t>(int_field(j, "memory_bytes", 0, int64_t{1} << 50));
  r.time_ms = int_field(j, "time_ms", 1, INT64_MAX);
  if (j.contains("loadable")) r.loadable = loadable_field(j);
  return r;
}

Registration verify_registration(std::string_view body, std::string_view signature, int64_t now_ms,
                                 int64_t max_skew_ms) {
  Registration r = parse_registration(body);
  net::Signature sig{};
  size_t n = 0;
  const char* end = nullptr;
  if (signature.size() > 2 * net::kSignatureBytes ||
      sodium_base642bin(sig.data(), sig.size(), signature.data(), signature.size(), nullptr, &n,
                        &end, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      n != sig.size() || end != signature.data() + signature.size()) {
    throw Error("hub", "registration: the signature is not 64 bytes of URL-safe base64");
  }
  if (!net::verify_signature(r.id, signed_bytes(body), sig)) {
    throw Error("hub", "registration: the signature is not " + r.id.to_text() + "'s");
  }
  const int64_t skew = r.time_ms > now_ms ? r.time_ms - now_ms : now_ms - r.time_ms;
  if (skew > max_skew_ms) {
    throw Error("hub", "registration: its time is " + std::to_string(skew / 1000) +
                           " s from the hub's (at most " + std::to_string(max_skew_ms / 1000) +
                           " s: a replay, or a clock to set)");
  }
  return r;
}

}  // namespace herd::hub
