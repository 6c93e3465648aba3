// Reading a small file that holds a secret (a cluster key, a node identity, API keys, the
// hub's secret): read whole, refused when larger than a bound, and every copy of its bytes
// wiped once it is parsed; and creating one, mode 0600, without a moment of half a file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace herd::net {

// The text of a secret file; wiped from memory when destroyed. Move-only.
class SecretText {
 public:
  explicit SecretText(std::string text) : text_(std::move(text)) {}
  SecretText(SecretText&& other) noexcept : text_(std::move(other.text_)) { other.text_.clear(); }
  SecretText& operator=(SecretText&&) = delete;
  SecretText(const SecretText&) = delete;
  SecretText& operator=(const SecretText&) = delete;
  ~SecretText();
  std::string_view view() const { return text_; }

 private:
  std::string text_;
};

// The file's text, or nullopt when it cannot be opened. A file of more than `max_bytes`
// is herd::Error "[net] <origin>: larger than <max_bytes> bytes; <too_large>".
std::optional<SecretText> read_secret_file(const std::filesystem::path& path,
                                           const std::string& origin, size_t max_bytes,
                                           std::string_view too_large);

// Creates `path` (and its directory) holding `text`, mode 0600: written to a temporary file
// beside it and linked into place, so a crash never leaves half a file and of processes
// creating it at once exactly one wins. False when a file was there already (it is left as
// it was: the caller reads it). Throws herd::Error "[net] <origin>: ..." when it cannot.
bool create_secret_file(const std::filesystem::path& path, std::string_view text,
                        const std::string& origin);

// Initialises libsodium (once; later calls are cheap). Throws herd::Error("net", ...) when it
// cannot.
void ensure_sodium();

// The spaces of a secret file's lines (space, tab, CR), and a line without them at its ends:
// the identity file and key files are read alike.
bool is_line_space(char c);
std::string_view trim_line(std::string_view s);

// Throws herd::Error "[net] <origin>: readable by every user ..." when the file at `path`
// is: a file of keys others can read is a leak to refuse, not to warn about.
void refuse_world_readable(const std::filesystem::path& path, const std::string& origin);

}  // namespace herd::net
