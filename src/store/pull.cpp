#include "store/pull.h"

#include <cctype>

#include "util/error.h"

namespace herd::store {

namespace {

constexpr size_t kMaxListingPage = 64u << 20;
constexpr int kMaxListingPages = 100;

std::string base(const PullOptions& o) {
  std::string e = o.endpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

// Percent-encodes every byte outside RFC 3986's unreserved set.
std::string escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::string file_url(const PullOptions& o, const ModelName& name, const std::string& path) {
  std::string url = base(o) + "/" + name.org + "/" + name.repo + "/resolve/" + escape(o.revision);
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    url.push_back('/');
    url.append(escape(path.substr(begin, end - begin)));
    begin = end + 1;
  }
  return url;
}

std::vector<RepoFile> fetch_listing(const ModelName& name, const PullOptions& o) {
  const std::string repo = name.repo_id();
  std::string url =
      base(o) + "/api/models/" + repo + "/tree/" + escape(o.revision) + "?recursive=true";
  std::vector<RepoFile> files;
  for (int page = 0; !url.empty(); ++page) {
    if (page == kMaxListingPages) {
      throw Error("store", "the listing of " + repo + " has more than " +
                               std::to_string(kMaxListingPages) + " pages");
    }
    const HttpReply reply = http_get(url, o.http, kMaxListingPage);
    if (reply.status == 404) {
      throw Error("store", "no repository " + repo + " at " + base(o) +
                               " (HTTP 404; a private or gated one needs HF_TOKEN)");
    }
    if (reply.status == 401 || reply.status == 403) {
      throw Error("store", repo + ": access denied (HTTP " + std::to_string(reply.status) +
                               "): a gated or private repository needs HF_TOKEN" +
                               (o.http.token.empty() ? "" : " with access to it"));
    }
    if (reply.status != 200) {
      throw Error("store", "the listing of " + repo + ": HTTP " + std::to_string(reply.status));
    }
    for (RepoFile& f : parse_listing(reply.body)) files.push_back(std::move(f));
    url = next_page_url(reply.link);
    // A relative next link is taken from the endpoint's root.
    if (!url.empty() && url.front() == '/') url = base(o) + url;
  }
  return files;
}

LocalModel pull(const Store& store, const ModelName& name, const PullOptions& o) {
  const std::vector<RepoFile> listing = fetch_listing(name, o);
  LocalModel out{pick_model(listing, name), {}, true};
  for (const RepoFile& f : out.model.files) {
    if (std::optional<fs::path> copy = store.find_copy(name, f)) {
      if (o.on_file) o.on_file(f, *copy, false);
      if (copy->parent_path().string().rfind(store.root().string(), 0) != 0) out.in_store = false;
      out.paths.push_back(*copy);
      continue;
    }
    const fs::path dest = store.store_path(name, f);
    if (o.on_file) o.on_file(f, dest, true);
    download_file(file_url(o, name, f.path), dest, f.size, f.sha256, o.http);
    out.paths.push_back(dest);
  }
  return out;
}

}  // namespace herd::store
