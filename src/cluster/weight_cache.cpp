#include "cluster/weight_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include <xxhash.h>

#include "util/error.h"

namespace herd::cluster {
namespace fs = std::filesystem;

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] != '\0')
    return fs::path(xdg) / "herd";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return fs::path(home) / ".cache" / "herd";
  throw Error("cluster", "no cache directory: set XDG_CACHE_HOME or HOME, or give --cache-dir");
}

std::string to_hex(const net::ContentHash& hash) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(hash.high),
                static_cast<unsigned long long>(hash.low));
  return text;
}

namespace {

struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

FileStamp stamp_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error("cluster", "cannot read '" + path.string() + "': " + std::strerror(errno));
  }
#if defined(__APPLE__)
  const int64_t mtime_ns = int64_t{st.st_mtimespec.tv_sec} * 1000000000 + st.st_mtimespec.tv_nsec;
#else
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
#endif
  return {static_cast<uint64_t>(st.st_size), mtime_ns};
}

net::ContentHash hash_file(const fs::path& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!in) throw Error("cluster", "cannot read '" + path.string() + "': " + std::strerror(errno));
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(),
                                                                        &XXH3_freeState);
  XXH3_128bits_reset(state.get());
  std::vector<uint8_t> block(size_t{4} << 20);
  for (;;) {
    size_t n = std::fread(block.data(), 1, block.size(), in.get());
    if (n > 0) XXH3_128bits_update(state.get(), block.data(), n);
    if (n < block.size()) break;
  }
  if (std::ferror(in.get())) {
    throw Error("cluster", "cannot read '" + path.string() + "': " + std::strerror(errno));
  }
  XXH128_hash_t h = XXH3_128bits_digest(state.get());
  return {h.low64, h.high64};
}

}  // namespace

net::ContentHash file_content_hash(const fs::path& path_in, const fs::path& cache_dir) {
  const fs::path path = fs::absolute(path_in);
  const FileStamp stamp = stamp_of(path);
  if (cache_dir.empty()) return hash_file(path);

  const std::string key = path.string();
  char name[17];
  std::snprintf(name, sizeof name, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
  const fs::path memo = cache_dir / "hashes" / name;
  {
    std::ifstream in(memo);
    unsigned long long size = 0, low = 0, high = 0;
    long long mtime = 0;
    std::string memo_path;
    if (in >> size >> mtime >> high >> low && std::getline(in >> std::ws, memo_path) &&
        size == stamp.size && mtime == stamp.mtime_ns && memo_path == key) {
      return {low, high};
    }
  }
  const net::ContentHash hash = hash_file(path);
  // The memo is an optimisation: failing to write it costs a re-hash next time, no more.
  std::error_code ec;
  fs::create_directories(memo.parent_path(), ec);
  const fs::path tmp = memo.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << stamp.size << ' ' << stamp.mtime_ns << ' ' << hash.high << ' ' << hash.low << ' ' << key
        << '\n';
  }
  fs::rename(tmp, memo, ec);
  return hash;
}

net::ContentHash model_content_hash(const std::vector<std::string>& paths,
                                    const fs::path& cache_dir) {
  HERD_CHECK(!paths.empty());
  if (paths.size() == 1) return file_content_hash(paths.front(), cache_dir);
  std::vector<uint64_t> halves;
  for (const std::string& path : paths) {
    const net::ContentHash h = file_content_hash(path, cache_dir);
    halves.push_back(h.low);
    halves.push_back(h.high);
  }
  const XXH128_hash_t h = XXH3_128bits(halves.data(), halves.size() * sizeof(uint64_t));
  return {h.low64, h.high64};
}

fs::path shard_cache_path(const fs::path& cache_dir, const net::ContentHash& model_hash,
                          const Assignment& a) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  auto add = [&](const std::string& text) {
    XXH64_update(state, text.data(), text.size());
    XXH64_update(state, "\n", 1);
  };
  for (const TensorDesc& t : a.tensors) {
    // (Appended piece by piece: g++ 12 warns falsely on " " + string.)
    std::string line = t.name;
    line.append(" ").append(std::to_string(static_cast<uint32_t>(t.type)));
    for (int64_t dim : t.shape) line.append(" ").append(std::to_string(dim));
    add(line);
  }
  add(to_json(a)["slice"].dump());
  const unsigned long long key = XXH64_digest(state);
  XXH64_freeState(state);
  char file[32];
  std::snprintf(file, sizeof file, "%016llx.gguf", key);
  return cache_dir / "models" / to_hex(model_hash) / file;
}

std::vector<std::string> cached_models(const fs::path& cache_dir) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(cache_dir / "models", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != 32 || name.find_first_not_of("0123456789abcdef") != std::string::npos ||
        !it->is_directory(ec))
      continue;
    const fs::file_time_type when = fs::last_write_time(it->path(), ec);
    if (!ec) found.emplace_back(when, name);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace herd::cluster
