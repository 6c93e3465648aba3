#include "net/secret_file.h"

#include <sodium.h>

#include <fstream>

#include "util/error.h"

namespace herd::net {

SecretText::~SecretText() {
  if (!text_.empty()) sodium_memzero(text_.data(), text_.size());
}

std::optional<SecretText> read_secret_file(const std::filesystem::path& path,
                                           const std::string& origin, size_t max_bytes,
                                           std::string_view too_large) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes;
  char buffer[1024];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    bytes.append(buffer, static_cast<size_t>(in.gcount()));
    if (bytes.size() > max_bytes) {
      sodium_memzero(buffer, sizeof buffer);
      sodium_memzero(bytes.data(), bytes.size());
      throw Error("net", origin + ": larger than " + std::to_string(max_bytes) + " bytes; " +
                             std::string(too_large));
    }
  }
  sodium_memzero(buffer, sizeof buffer);
  return SecretText(std::move(bytes));
}

}  // namespace herd::net
