#include "net/secret_file.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

bool create_secret_file(const std::filesystem::path& path, std::string_view text,
                        const std::string& origin) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) throw Error("net", origin + ": cannot create its directory: " + ec.message());
  // Unique per call, not only per process (two threads may start at once too).
  const std::string temp = path.string() + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(randombytes_random());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Error("net", origin + ": cannot create it: " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t put = ::write(fd, text.data() + done, text.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) break;
    done += static_cast<size_t>(put);
  }
  const bool written = done == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  // link() fails when another process created the file meanwhile: then its file wins.
  const bool linked = written && ::link(temp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(temp.c_str());
  if (!written) throw Error("net", origin + ": cannot write it");
  if (!linked) {
    if (link_errno == EEXIST) return false;
    throw Error("net", origin + ": cannot create it: " + std::strerror(link_errno));
  }
  return true;
}

void refuse_world_readable(const std::filesystem::path& path, const std::string& origin) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    throw Error("net", origin + ": readable by every user; make it private (chmod 600 '" +
                           path.string() + "')");
  }
}

void ensure_sodium() {
  // sodium_init is idempotent and thread-safe; 1 means "already initialised".
  if (sodium_init() < 0) throw Error("net", "libsodium failed to initialise");
}

bool is_line_space(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::string_view trim_line(std::string_view s) {
  while (!s.empty() && is_line_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_line_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace herd::net
