#include "store/downloader.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "store/hf_listing.h"
#include "util/error.h"

namespace herd::store {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxErrorBody = 4096;
constexpr long kMaxBackoffS = 30;

void init_libraries() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || sodium_init() < 0) {
      throw Error("store", "cannot initialize libcurl or libsodium");
    }
  });
}

std::string hex(const unsigned char* bytes, size_t n) {
  std::string out(n * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes, n);
  out.pop_back();
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What one response (the last of a redirect chain) said, and where its body goes.
struct Exchange {
  long status = 0;
  std::string retry_after;
  std::string content_range;
  std::string link;
  std::string error_body;  // a failed answer's first bytes, for the message
  // A GET's body (text != null) or a download's (fd >= 0).
  std::string* text = nullptr;
  size_t max_text = 0;
  bool too_long = false;
  int fd = -1;
  uint64_t offset = 0;  // bytes of the file present
  uint64_t size = 0;    // the file's size
  crypto_hash_sha256_state* hash = nullptr;
  bool started = false;   // the body's first bytes were seen
  bool bad_body = false;  // a wrong Content-Range, or more bytes than the size
  std::string bad_reason;
  int write_errno = 0;
  const HttpOptions* options = nullptr;
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t b = 0;
  while (b < s.size() && s[b] == ' ') ++b;
  return s.substr(b);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or 100)
    const size_t sp = line.find(' ');
    x->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    x->retry_after.clear();
    x->content_range.clear();
    x->link.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string key = lower(line.substr(0, colon));
  const std::string value = trim(line.substr(colon + 1));
  if (key == "retry-after") x->retry_after = value;
  if (key == "content-range") x->content_range = value;
  if (key == "link") x->link = value;
  return size * n;
}

bool success(long status) {
  return status == 200 || status == 206;
}

// The first byte offset of "bytes S-E/T", or -1.
int64_t range_start(const std::string& content_range) {
  if (content_range.rfind("bytes ", 0) != 0) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(content_range.c_str() + 6, &end, 10);
  return end && *end == '-' ? v : -1;
}

// The body's first bytes decide: 200 while resuming starts the file over; 206 must start
// where the file ends.
bool start_body(Exchange* x) {
  x->started = true;
  if (x->status == 200 && x->offset > 0) {
    if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0) {
      x->write_errno = errno;
      return false;
    }
    x->offset = 0;
    crypto_hash_sha256_init(x->hash);
  } else if (x->status == 206 && range_start(x->content_range) != static_cast<int64_t>(x->offset)) {
    x->bad_body = true;
    x->bad_reason = "the server answered the range from byte " + std::to_string(x->offset) +
                    " with '" + x->content_range.substr(0, 80) + "'";
    return false;
  }
  return true;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const size_t bytes = size * n;
  if (!success(x->status)) {
    const size_t keep =
        std::min(bytes, kMaxErrorBody - std::min(kMaxErrorBody, x->error_body.size()));
    x->error_body.append(data, keep);
    return bytes;
  }
  if (x->text) {
    if (x->text->size() + bytes > x->max_text) {
      x->too_long = true;
      return 0;
    }
    x->text->append(data, bytes);
    return bytes;
  }
  if (!x->started && !start_body(x)) return 0;
  if (x->offset + bytes > x->size) {
    x->bad_body = true;
    x->bad_reason = "the server sent more than the listing's " + std::to_string(x->size) + " bytes";
    return 0;
  }
  for (size_t done = 0; done < bytes;) {
    const ssize_t w = ::write(x->fd, data + done, bytes - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      x->write_errno = w < 0 ? errno : EIO;
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  crypto_hash_sha256_update(x->hash, reinterpret_cast<const unsigned char*>(data), bytes);
  x->offset += bytes;
  if (x->options->on_progress) x->options->on_progress(x->offset, x->size);
  return bytes;
}

struct CurlHandle {
  CURL* curl = curl_easy_init();
  curl_slist* headers = nullptr;
  ~CurlHandle() {
    curl_slist_free_all(headers);
    if (curl) curl_easy_cleanup(curl);
  }
};

// One request; returns libcurl's result. Fills x through the callbacks.
CURLcode perform(const std::string& url, const HttpOptions& o, Exchange* x, uint64_t from) {
  CurlHandle h;
  if (!h.curl) throw Error("store", "libcurl cannot make a handle");
  if (!o.token.empty()) {
    h.headers = curl_slist_append(h.headers, ("Authorization: Bearer " + o.token).c_str());
  }
  curl_easy_setopt(h.curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.curl, CURLOPT_HTTPHEADER, h.headers);
  curl_easy_setopt(h.curl, CURLOPT_USERAGENT, "herd");
  curl_easy_setopt(h.curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h.curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h.curl, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
  curl_easy_setopt(h.curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h.curl, CURLOPT_LOW_SPEED_TIME, o.stall_timeout_s);
  curl_easy_setopt(h.curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h.curl, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(h.curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h.curl, CURLOPT_WRITEDATA, x);
  const std::string range = std::to_string(from) + "-";
  if (from > 0) curl_easy_setopt(h.curl, CURLOPT_RANGE, range.c_str());
  return curl_easy_perform(h.curl);
}

bool retryable_status(long status) {
  return status == 429 || status >= 500;
}

// How many tries a transport failure is worth: none more for what no retry mends (a bad
// URL, a certificate), three for a host that cannot be reached (offline fails in seconds,
// not minutes), all for a connection that was cut or stalled.
int tries_for(CURLcode rc, const HttpOptions& o) {
  switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_TOO_MANY_REDIRECTS:
      return 1;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
      return std::min(3, o.max_tries);
    default:
      return o.max_tries;
  }
}

// Seconds to wait before try `tries` + 1: the server's Retry-After (seconds or an HTTP
// date), else 1, 2, 4 ... capped.
long wait_seconds(const Exchange& x, int tries, const HttpOptions& o, const std::string& what) {
  if (!x.retry_after.empty()) {
    char* end = nullptr;
    long s = std::strtol(x.retry_after.c_str(), &end, 10);
    if (end == x.retry_after.c_str() || *end != '\0') {
      const time_t when = curl_getdate(x.retry_after.c_str(), nullptr);
      s = when < 0 ? 1 : static_cast<long>(when - time(nullptr));
    }
    s = std::max(0L, s);
    if (s > o.max_retry_after.count()) {
      throw Error("store", what + ": HTTP " + std::to_string(x.status) +
                               ", and the server asks to wait " + std::to_string(s) +
                               " s (Retry-After): try again later");
    }
    return s;
  }
  return std::min(kMaxBackoffS, 1L << std::min(tries - 1, 10));
}

void note(const HttpOptions& o, const std::string& text) {
  if (o.on_note) o.on_note(text);
}

std::string status_text(const Exchange& x) {
  std::string body = x.error_body.substr(0, 200);
  for (char& c : body) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return "HTTP " + std::to_string(x.status) + (body.empty() ? "" : " (" + trim(body) + ")");
}

// An open, exclusively locked "<final>.partial" whose name still points at it.
class PartialFile {
 public:
  PartialFile(const fs::path& path, const HttpOptions& o) : path_(path) {
    for (int tries = 0; tries < 100; ++tries) {
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0) {
        throw Error("store", "cannot open '" + path.string() + "': " + std::strerror(errno));
      }
      if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        note(o, "waiting for another herd that downloads " + path.filename().string());
        while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
        }
      }
      struct stat by_fd {
      }, by_name{};
      if (fstat(fd_, &by_fd) == 0 && ::stat(path.c_str(), &by_name) == 0 &&
          by_fd.st_ino == by_name.st_ino && by_fd.st_dev == by_name.st_dev) {
        return;  // ours, and still the partial file
      }
      ::close(fd_);  // the other process finished and renamed it: look again
      fd_ = -1;
      std::error_code ec;
      if (fs::exists(path_.parent_path() / path_.stem(), ec)) return;
    }
    throw Error("store", "cannot lock '" + path.string() + "'");
  }
  ~PartialFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;
  int fd() const { return fd_; }

 private:
  fs::path path_;
  int fd_ = -1;
};

// Hashes the first `n` bytes of fd into `hash`; false when they cannot be read.
bool hash_prefix(int fd, uint64_t n, crypto_hash_sha256_state* hash) {
  std::vector<unsigned char> buf(1 << 20);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), n - done), static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    crypto_hash_sha256_update(hash, buf.data(), static_cast<size_t>(r));
    done += static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

HttpReply http_get(const std::string& url, const HttpOptions& options, size_t max_bytes) {
  init_libraries();
  for (int tries = 1;; ++tries) {
    HttpReply reply;
    Exchange x;
    x.text = &reply.body;
    x.max_text = max_bytes;
    x.options = &options;
    const CURLcode rc = perform(url, options, &x, 0);
    if (x.too_long) {
      throw Error("store",
                  url + ": the answer is longer than " + std::to_string(max_bytes) + " bytes");
    }
    const bool retry = rc != CURLE_OK || retryable_status(x.status);
    if (!retry) {
      reply.status = x.status;
      reply.link = x.link;
      if (!success(x.status)) reply.body = x.error_body;
      return reply;
    }
    const std::string why = rc != CURLE_OK ? curl_easy_strerror(rc) : status_text(x);
    const int max_tries = rc != CURLE_OK ? tries_for(rc, options) : options.max_tries;
    if (tries >= max_tries) {
      throw Error("store", url + ": " + why + " (" + std::to_string(tries) + " tr" +
                               (tries == 1 ? "y" : "ies") + ")");
    }
    const long s = rc != CURLE_OK ? std::min(kMaxBackoffS, 1L << std::min(tries - 1, 10))
                                  : wait_seconds(x, tries, options, url);
    note(options, why + ": waiting " + std::to_string(s) + " s before try " +
                      std::to_string(tries + 1) + " of " + std::to_string(max_tries));
    std::this_thread::sleep_for(std::chrono::seconds(s));
  }
}

void download_file(const std::string& url, const fs::path& final_path, uint64_t size,
                   const std::string& sha256, const HttpOptions& options) {
  init_libraries();
  const std::string name = final_path.filename().string();
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) {
    throw Error("store",
                "cannot create '" + final_path.parent_path().string() + "': " + ec.message());
  }
  const fs::path partial_path = final_path.string() + ".partial";
  PartialFile partial(partial_path, options);
  if (partial.fd() < 0) return;  // another process finished it while this one waited
  if (fs::exists(final_path, ec) && fs::file_size(final_path, ec) == size && !ec) {
    ::unlink(partial_path.c_str());  // finished by another process before this one's open
    return;
  }
  const int fd = partial.fd();

  crypto_hash_sha256_state hash;
  crypto_hash_sha256_init(&hash);
  struct stat st {};
  uint64_t offset = fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (offset > size || (offset > 0 && !hash_prefix(fd, offset, &hash))) {
    if (ftruncate(fd, 0) != 0)
      throw Error("store", "cannot truncate '" + partial_path.string() + "'");
    offset = 0;
    crypto_hash_sha256_init(&hash);
  }
  if (offset > 0) note(options, name + ": resuming at " + format_size(offset));
  if (options.on_progress) options.on_progress(offset, size);

  for (int tries = 1; offset < size;) {
    Exchange x;
    x.fd = fd;
    x.offset = offset;
    x.size = size;
    x.hash = &hash;
    x.options = &options;
    if (lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
      throw Error("store", "cannot seek in '" + partial_path.string() + "'");
    }
    const CURLcode rc = perform(url, options, &x, offset);
    if (x.write_errno != 0) {
      throw Error("store",
                  "cannot write '" + partial_path.string() + "': " + std::strerror(x.write_errno));
    }
    const bool moved = x.offset > offset;
    offset = x.offset;
    if (rc == CURLE_OK && success(x.status) && offset == size) break;
    std::string why;
    long wait = 0;
    if (x.bad_body) {
      why = x.bad_reason;  // start over
      if (ftruncate(fd, 0) != 0)
        throw Error("store", "cannot truncate '" + partial_path.string() + "'");
      offset = 0;
      crypto_hash_sha256_init(&hash);
    } else if (x.status == 416 && offset > 0) {
      why = "the server refused the range from byte " + std::to_string(offset);
      if (ftruncate(fd, 0) != 0)
        throw Error("store", "cannot truncate '" + partial_path.string() + "'");
      offset = 0;
      crypto_hash_sha256_init(&hash);
    } else if (success(x.status) || (rc != CURLE_OK && x.status < 400)) {
      why = rc != CURLE_OK ? std::string("connection ") + (moved ? "cut" : "failed") + " (" +
                                 curl_easy_strerror(rc) + ")"
                           : "the server ended the file at byte " + std::to_string(offset);
      if (moved) tries = 0;  // progress: a new run of tries
      wait = moved ? 0 : std::min(kMaxBackoffS, 1L << std::min(tries - 1, 10));
    } else if (retryable_status(x.status)) {
      why = status_text(x);
      wait = wait_seconds(x, tries, options, name);
    } else if (x.status == 401 || x.status == 403) {
      throw Error("store", name + ": " + status_text(x) +
                               ": access denied (a gated or private repository needs HF_TOKEN)");
    } else {
      throw Error("store", name + ": " + status_text(x));
    }
    const int max_tries =
        rc != CURLE_OK && !success(x.status) ? tries_for(rc, options) : options.max_tries;
    if (tries >= max_tries) {
      throw Error("store", name + ": " + why + "; gave up after " + std::to_string(tries) +
                               " tries (what arrived is kept: run the pull again to resume)");
    }
    ++tries;
    note(options, name + ": " + why + (offset > 0 ? ", resuming at " + format_size(offset) : "") +
                      (wait > 0 ? "; trying again in " + std::to_string(wait) + " s" : ""));
    std::this_thread::sleep_for(std::chrono::seconds(wait));
  }

  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&hash, digest);
  const std::string got = hex(digest, sizeof digest);
  if (!sha256.empty() && got != sha256) {
    ::unlink(partial_path.c_str());
    throw Error("store", name + ": SHA-256 " + got + " is not the listing's " + sha256 +
                             ": the downloaded data was deleted, nothing was stored");
  }
  if (fsync(fd) != 0 || ::rename(partial_path.c_str(), final_path.c_str()) != 0) {
    throw Error("store", "cannot store '" + final_path.string() + "': " + std::strerror(errno));
  }
}

std::string sha256_file(const fs::path& path) {
  init_libraries();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("store", "cannot open '" + path.string() + "': " + std::strerror(errno));
  struct stat st {};
  crypto_hash_sha256_state hash;
  crypto_hash_sha256_init(&hash);
  const bool ok = fstat(fd, &st) == 0 && hash_prefix(fd, static_cast<uint64_t>(st.st_size), &hash);
  ::close(fd);
  if (!ok) throw Error("store", "cannot read '" + path.string() + "'");
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&hash, digest);
  return hex(digest, sizeof digest);
}

}  // namespace herd::store
