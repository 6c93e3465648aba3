// HTTP for the model store, through libcurl: small GET requests (a repository's listing) and
// file downloads that resume, verify and never leave a partial file under the final name.
//
// Both retry what a busy or flaky hub does to a client: 429 and 5xx answers wait the
// Retry-After the server gives (else 1, 2, 4 ... s, at most 30 s), a connection cut or
// stalled (no byte for stall_timeout) is tried again; a host that cannot be reached is
// tried three times, a bad URL or certificate once. A download that moved forward since
// the last try starts its count of tries afresh: a long file over a link that drops every
// few minutes still arrives.
//
// A download writes "<final>.partial" beside the final name and resumes it with an HTTP
// Range request; when the server ignores the range it starts over. The file is renamed to
// its final name only after its SHA-256 (libsodium's streaming crypto_hash_sha256) matches
// the one given; on a mismatch the data is deleted. Two processes pulling the same file
// (ranks of one machine, two shells) take turns on an flock of the partial file: the second
// finds the file done.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace herd::store {

struct HttpOptions {
  // Sent as "Authorization: Bearer <token>" to the URL's host (libcurl drops it when a
  // redirect leads to another host, such as the hub's file CDN). Empty: none.
  std::string token;
  int max_tries = 8;                          // tries in a row without progress
  std::chrono::seconds max_retry_after{120};  // a longer Retry-After fails at once
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;  // no byte for this long: the connection counts as cut
  // What the caller may show: a retry and why ("HTTP 429: waiting 2 s (Retry-After)").
  std::function<void(const std::string&)> on_note;
  // Bytes of the file present (resumed ones included) and its size; called often.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
};

struct HttpReply {
  long status = 0;
  std::string body;
  std::string link;  // the Link header, for pagination
};

// GET `url`: the final answer after redirects and retries (429 and 5xx only while tries
// remain). Throws herd::Error "[store] ..." when the server cannot be reached or the body
// passes max_bytes.
HttpReply http_get(const std::string& url, const HttpOptions& options, size_t max_bytes);

// Downloads `url` to `final_path` as described above: `size` bytes whose SHA-256 is
// `sha256` (lowercase hex; empty: only the size is checked). Creates the parent folders.
// Throws herd::Error "[store] ..." naming the file and the reason (the HTTP status, a hash
// mismatch, tries used up); what was received is kept in the partial file for the next
// try, except data that failed the hash.
void download_file(const std::string& url, const std::filesystem::path& final_path, uint64_t size,
                   const std::string& sha256, const HttpOptions& options);

// The SHA-256 of a whole file, as 64 lowercase hex digits. Throws herd::Error when it
// cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace herd::store
