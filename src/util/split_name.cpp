#include "util/split_name.h"

#include <cctype>
#include <cstdio>
#include <regex>

namespace herd {

std::string SplitName::part_path(int n) const {
  char digits[16];
  std::snprintf(digits, sizeof digits, "-%05d", n);
  return prefix + digits + suffix;
}

std::optional<SplitName> parse_split_name(std::string_view path) {
  static const std::regex kSplit(R"(^(.*)-([0-9]{5})(-of-([0-9]{5})\.gguf)$)", std::regex::icase);
  const std::string text(path);
  std::smatch m;
  if (!std::regex_match(text, m, kSplit)) return std::nullopt;
  SplitName s{m[1].str(), std::stoi(m[2].str()), std::stoi(m[4].str()), m[3].str()};
  if (s.of < 1 || s.part < 1 || s.part > s.of) return std::nullopt;
  return s;
}

std::string model_stem(std::string_view path) {
  if (std::optional<SplitName> s = parse_split_name(path)) return s->prefix;
  constexpr std::string_view kExt = ".gguf";
  if (path.size() >= kExt.size()) {
    std::string tail(path.substr(path.size() - kExt.size()));
    for (char& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (tail == kExt) return std::string(path.substr(0, path.size() - kExt.size()));
  }
  return std::string(path);
}

}  // namespace herd
