#include "hub/pod_loads.h"

#include <sodium.h>

#include <filesystem>
#include <system_error>

#include "util/error.h"
#include "util/split_name.h"

namespace herd::hub {

std::vector<std::string> ModelDir::names() const {
  std::vector<std::string> out;
  for (const auto& [name, path] : models) out.push_back(name);
  return out;
}

ModelDir list_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("hub", "--models-dir '" + dir + "' is not a directory");
  std::map<std::string, std::string> found;
  ModelDir out;
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error("hub", "--models-dir '" + dir + "': " + ec.message());
  for (const fs::directory_entry& entry : it) {
    const fs::path& path = entry.path();
    if (path.extension() != ".gguf" || !entry.is_regular_file(ec)) continue;
    // A split model is its first file (which opens the others), named without the suffix.
    const std::string file_name = path.filename().string();
    if (const std::optional<SplitName> split = parse_split_name(file_name);
        split && split->part != 1)
      continue;
    const std::string name = model_stem(file_name);
    bool printable = !name.empty() && name.size() <= 256;
    for (unsigned char c : name) printable = printable && c >= 0x20 && c != 0x7f;
    if (!printable) {
      out.skipped.push_back(path.string() + ": its name is not 1-256 printable bytes");
      continue;
    }
    found.emplace(name, path.string());
  }
  for (const auto& [name, path] : found) {
    if (out.models.size() == kMaxLoadable) {
      out.skipped.push_back(path + ": more than " + std::to_string(kMaxLoadable) + " models");
      continue;
    }
    out.models.emplace(name, path);
  }
  return out;
}

int check_control_token(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return 401;
  const std::string_view given = authorization.substr(kBearer.size());
  if (token.empty() || given.size() != token.size()) return 403;
  return sodium_memcmp(given.data(), token.data(), token.size()) == 0 ? 0 : 403;
}

}  // namespace herd::hub
