#include "server/parser_text.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace herd::server {

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

size_t partial_marker(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

std::string decode_string(const std::string& token) {
  const nlohmann::json value = nlohmann::json::parse(token, nullptr, false);
  if (value.is_string()) return value.get<std::string>();
  std::string_view inner(token);
  if (inner.starts_with('"')) inner.remove_prefix(1);
  if (inner.ends_with('"')) inner.remove_suffix(1);
  return std::string(inner);
}

std::string json_escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(c));
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : code;
    } else {
      out += c;
    }
  }
  return out;
}

bool plausible_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameBytes &&
         name.find_first_of(" \t\r\n\"'<>{}") == std::string_view::npos;
}

std::string closest_name(const std::string& written, const std::vector<std::string>& names) {
  if (names.empty() || std::find(names.begin(), names.end(), written) != names.end()) {
    return written;
  }
  size_t best = 0, best_shared = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto [a, b] =
        std::mismatch(written.begin(), written.end(), names[i].begin(), names[i].end());
    const size_t shared = static_cast<size_t>(a - written.begin());
    if (shared > best_shared) {
      best = i;
      best_shared = shared;
    }
  }
  return names[best];
}

void ArgumentsText::add(char c) {
  if (in_string_ || !is_space(c)) text_ += c;
  if (!in_string_) {
    in_string_ = c == '"';
  } else if (escape_) {
    escape_ = false;
  } else if (c == '\\') {
    escape_ = true;
  } else if (c == '"') {
    in_string_ = false;
  }
}

}  // namespace herd::server
