#include "store/hf_listing.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/split_name.h"

namespace herd::store {

namespace {

constexpr size_t kMaxEntries = 100000;
constexpr size_t kMaxNamePart = 96;
constexpr size_t kMaxPath = 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}

// A repository's name part; an organization's (or user's) name has no '.' on the hub,
// so "hf.co/..." can never be one.
bool valid_name_part(std::string_view s, bool dots) {
  if (s.empty() || s.size() > kMaxNamePart || s.front() == '.' || s.front() == '-') return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' &&
        (c != '.' || !dots)) {
      return false;
    }
  }
  return s.find("..") == std::string_view::npos;
}

bool valid_quant(std::string_view s) {
  if (s.empty() || s.size() > kMaxNamePart) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

// A path the store may create under org/repo/: relative, components neither empty nor "."
// nor "..", no backslash or control byte.
bool safe_path(std::string_view path) {
  if (path.empty() || path.size() > kMaxPath || path.front() == '/') return false;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") return false;
    begin = end + 1;
  }
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') return false;
  }
  return true;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
  });
}

bool is_separator(char c) {
  return c == '-' || c == '.' || c == '_' || c == '/';
}

// True when `tag` occurs in `stem` (both lower case) with a separator or an end on each
// side; after it not '_', so that "q4_k" does not name "q4_k_m".
bool holds_tag(const std::string& stem, const std::string& tag) {
  for (size_t at = stem.find(tag); at != std::string::npos; at = stem.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    const bool before = at == 0 || is_separator(stem[at - 1]);
    const bool after = end == stem.size() || (is_separator(stem[end]) && stem[end] != '_');
    if (before && after) return true;
  }
  return false;
}

}  // namespace

std::optional<ModelName> parse_model_name(std::string_view text) {
  for (std::string_view prefix : {"https://huggingface.co/", "huggingface.co/", "hf.co/"}) {
    if (text.substr(0, prefix.size()) == prefix) {
      text.remove_prefix(prefix.size());
      break;
    }
  }
  if (ends_with_ci(text, ".gguf")) return std::nullopt;
  ModelName name;
  const size_t colon = text.find(':');
  std::string_view id = text.substr(0, colon);
  if (colon != std::string_view::npos) {
    name.quant = std::string(text.substr(colon + 1));
    if (!valid_quant(name.quant)) return std::nullopt;
  }
  const size_t slash = id.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  name.org = std::string(id.substr(0, slash));
  name.repo = std::string(id.substr(slash + 1));
  if (!valid_name_part(name.org, false) || !valid_name_part(name.repo, true)) return std::nullopt;
  return name;
}

std::vector<RepoFile> parse_listing(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, false);
  if (doc.is_discarded()) throw Error("store", "the repository listing is not JSON");
  if (!doc.is_array()) throw Error("store", "the repository listing is not a JSON array");
  if (doc.size() > kMaxEntries) {
    throw Error("store",
                "the repository listing has more than " + std::to_string(kMaxEntries) + " entries");
  }
  std::vector<RepoFile> out;
  for (const nlohmann::json& e : doc) {
    if (!e.is_object()) throw Error("store", "a listing entry is not an object");
    auto type = e.find("type");
    auto path = e.find("path");
    if (type == e.end() || !type->is_string() || path == e.end() || !path->is_string()) {
      throw Error("store", "a listing entry has no string 'type' and 'path'");
    }
    if (*type != "file") continue;
    RepoFile f;
    f.path = path->get<std::string>();
    if (!safe_path(f.path)) {
      throw Error("store", "the listing names an unsafe path '" + f.path.substr(0, 200) + "'");
    }
    auto size = e.find("size");
    if (size == e.end() || !size->is_number_unsigned()) {
      throw Error("store", "listing entry '" + f.path + "' has no size");
    }
    f.size = size->get<uint64_t>();
    auto lfs = e.find("lfs");
    if (lfs != e.end() && !lfs->is_null()) {
      auto oid = lfs->is_object() ? lfs->find("oid") : lfs->end();
      if (!lfs->is_object() || oid == lfs->end() || !oid->is_string() ||
          !is_hex64(lower(oid->get<std::string>()))) {
        throw Error("store", "listing entry '" + f.path + "': 'lfs.oid' is not a SHA-256");
      }
      f.sha256 = lower(oid->get<std::string>());
      auto lfs_size = lfs->find("size");
      if (lfs_size != lfs->end() && lfs_size->is_number_unsigned() &&
          lfs_size->get<uint64_t>() != f.size) {
        throw Error("store", "listing entry '" + f.path + "': its size and lfs.size differ");
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::string next_page_url(std::string_view header) {
  // <url>; rel="next", <url2>; rel="prev"
  size_t at = 0;
  while (at < header.size()) {
    const size_t open = header.find('<', at);
    if (open == std::string_view::npos) return "";
    const size_t close = header.find('>', open);
    if (close == std::string_view::npos) return "";
    size_t end = header.find(',', close);
    if (end == std::string_view::npos) end = header.size();
    const std::string params = lower(header.substr(close + 1, end - close - 1));
    if (params.find("rel=\"next\"") != std::string::npos ||
        params.find("rel=next") != std::string::npos) {
      return std::string(header.substr(open + 1, close - open - 1));
    }
    at = end + 1;
  }
  return "";
}

uint64_t ModelFiles::total_size() const {
  uint64_t total = 0;
  for (const RepoFile& f : files) total += f.size;
  return total;
}

std::string quant_of(std::string_view path) {
  static const std::regex kQuant(
      R"(^(i?q[0-9]+(_[a-z0-9]+)*|f16|f32|bf16|fp16|fp32|mxfp4(_moe)?|tq[0-9]_[0-9])$)",
      std::regex::icase);
  std::string p(path);
  const size_t slash = p.rfind('/');
  const std::string stem = ends_with_ci(p, ".gguf") ? model_stem(p) : p;
  const std::string file = stem.substr(slash == std::string::npos ? 0 : slash + 1);
  // Tokens between '-' and '.': the tag is the last token that looks like one; "UD" before
  // it (Unsloth's dynamic quants) belongs to it.
  std::vector<std::string> tokens;
  size_t begin = 0;
  for (size_t i = 0; i <= file.size(); ++i) {
    if (i == file.size() || file[i] == '-' || file[i] == '.') {
      tokens.push_back(file.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  for (size_t i = tokens.size(); i-- > 0;) {
    if (!std::regex_match(tokens[i], kQuant)) continue;
    std::string tag = upper(tokens[i]);
    if (i > 0 && upper(tokens[i - 1]) == "UD") tag = "UD-" + tag;
    return tag;
  }
  return "";
}

std::vector<ModelFiles> gguf_models(const std::vector<RepoFile>& files) {
  std::vector<ModelFiles> out;
  // split base + count -> parts by number
  std::map<std::pair<std::string, int>, std::map<int, RepoFile>> splits;
  for (const RepoFile& f : files) {
    if (!ends_with_ci(f.path, ".gguf")) continue;
    if (auto s = parse_split_name(f.path)) {
      splits[{s->prefix, s->of}][s->part] = f;
      continue;
    }
    out.push_back(ModelFiles{{f}, quant_of(f.path)});
  }
  for (auto& [key, parts] : splits) {
    if (static_cast<int>(parts.size()) != key.second) continue;  // a part is missing
    ModelFiles m;
    for (auto& [n, f] : parts) m.files.push_back(std::move(f));
    m.quant = quant_of(m.files.front().path);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const ModelFiles& a, const ModelFiles& b) {
    return a.first_path() < b.first_path();
  });
  return out;
}

bool is_projector(const ModelFiles& model) {
  return lower(model.first_path()).find("mmproj") != std::string::npos;
}

std::string format_size(uint64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

std::string describe_choices(const std::vector<ModelFiles>& models) {
  std::string out;
  for (const ModelFiles& m : models) {
    if (!out.empty()) out += ", ";
    out += (m.quant.empty() ? m.first_path() : m.quant) + " (" + format_size(m.total_size()) +
           (m.files.size() > 1 ? " in " + std::to_string(m.files.size()) + " files" : "") + ")";
  }
  return out.empty() ? "none" : out;
}

ModelFiles pick_model(const std::vector<RepoFile>& files, const ModelName& name) {
  const std::string wanted = lower(name.quant);
  const bool projector_wanted = wanted.find("mmproj") != std::string::npos;
  std::vector<ModelFiles> candidates;
  for (ModelFiles& m : gguf_models(files)) {
    if (is_projector(m) == projector_wanted) candidates.push_back(std::move(m));
  }
  const std::string repo = name.repo_id();
  if (candidates.empty()) {
    throw Error("store", repo + " has no GGUF model file" +
                             (files.empty() ? std::string(" (an empty listing)") : ""));
  }
  auto matching = [&](auto&& pred) {
    std::vector<ModelFiles> out;
    for (const ModelFiles& m : candidates) {
      if (pred(m)) out.push_back(m);
    }
    return out;
  };
  auto one_of = [&](const std::vector<ModelFiles>& found, const std::string& what) {
    if (found.size() == 1) return found.front();
    std::string paths;
    for (const ModelFiles& m : found) paths += (paths.empty() ? "" : ", ") + m.first_path();
    throw Error("store", repo + ": " + what + " matches several models (" + paths +
                             "); name one by a longer tag");
  };
  if (wanted.empty()) {
    std::vector<ModelFiles> q4 = matching([](const ModelFiles& m) { return m.quant == "Q4_K_M"; });
    if (!q4.empty()) return one_of(q4, "the default Q4_K_M");
    if (candidates.size() == 1) return candidates.front();
    throw Error("store", repo + " holds several models and no Q4_K_M: name one as " + repo +
                             ":QUANT; available: " + describe_choices(candidates));
  }
  std::vector<ModelFiles> exact =
      matching([&](const ModelFiles& m) { return lower(m.quant) == wanted; });
  if (!exact.empty()) return one_of(exact, "quant " + name.quant);
  std::vector<ModelFiles> named = matching(
      [&](const ModelFiles& m) { return holds_tag(lower(model_stem(m.first_path())), wanted); });
  if (!named.empty()) return one_of(named, "quant " + name.quant);
  throw Error("store", repo + " has no " + name.quant +
                           " model; available: " + describe_choices(candidates));
}

}  // namespace herd::store
