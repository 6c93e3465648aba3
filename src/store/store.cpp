#include "store/store.h"

#include <algorithm>
#include <map>
#include <system_error>

#include "util/error.h"

namespace herd::store {

namespace {

constexpr std::string_view kPartial = ".partial";
constexpr size_t kMaxFilesPerRepo = 10000;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The regular files under `dir`, relative to it ('/'-separated), with their sizes; nothing
// when `dir` is missing or unreadable (an extra folder on an absent NAS is not an error).
std::vector<RepoFile> files_under(const fs::path& dir) {
  std::vector<RepoFile> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (out.size() == kMaxFilesPerRepo) break;
    std::error_code stat_ec;
    if (!it->is_regular_file(stat_ec)) continue;  // follows links: HF's cache links blobs
    const uint64_t size = it->file_size(stat_ec);
    if (stat_ec) continue;
    out.push_back(RepoFile{it->path().lexically_relative(dir).generic_string(), size, ""});
  }
  return out;
}

// The folders of an extra folder that may hold `name`'s repository as it is laid out there.
std::vector<fs::path> repo_copies(const fs::path& extra, const ModelName& name) {
  std::vector<fs::path> out{extra / name.org / name.repo};
  const fs::path snapshots = extra / ("models--" + name.org + "--" + name.repo) / "snapshots";
  std::error_code ec;
  if (fs::is_directory(snapshots, ec)) {
    std::vector<fs::path> revs;
    for (fs::directory_iterator it(snapshots, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      revs.push_back(it->path());
    }
    std::sort(revs.begin(), revs.end());
    out.insert(out.end(), revs.begin(), revs.end());
  }
  return out;
}

bool has_size(const fs::path& p, uint64_t size) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && fs::file_size(p, ec) == size && !ec;
}

std::optional<LocalModel> pick_in(const fs::path& dir, const ModelName& name, bool in_store) {
  std::vector<RepoFile> files = files_under(dir);
  if (files.empty()) return std::nullopt;
  try {
    LocalModel local{pick_model(files, name), {}, in_store};
    for (const RepoFile& f : local.model.files) local.paths.push_back(dir / f.path);
    return local;
  } catch (const Error&) {
    return std::nullopt;  // not here, or not decidable here: the listing decides
  }
}

// Removes `p`'s parent folders up to (not including) `stop` while they are empty.
void remove_empty_parents(fs::path p, const fs::path& stop) {
  std::error_code ec;
  for (p = p.parent_path(); p != stop && p.has_relative_path(); p = p.parent_path()) {
    if (!fs::is_empty(p, ec) || ec || !fs::remove(p, ec)) return;
  }
}

}  // namespace

fs::path default_root(const char* herd_models_dir, const char* xdg_data_home, const char* home) {
  if (herd_models_dir && *herd_models_dir) return herd_models_dir;
  if (xdg_data_home && *xdg_data_home) return fs::path(xdg_data_home) / "herd" / "models";
  if (home && *home) return fs::path(home) / ".local" / "share" / "herd" / "models";
  throw Error("store", "no model store: set --models-dir, HERD_MODELS_DIR, XDG_DATA_HOME or HOME");
}

std::vector<fs::path> parse_path_list(std::string_view list) {
  std::vector<fs::path> out;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(':', begin);
    if (end == std::string_view::npos) end = list.size();
    if (end > begin) out.emplace_back(std::string(list.substr(begin, end - begin)));
    begin = end + 1;
  }
  return out;
}

fs::path Store::store_path(const ModelName& name, const RepoFile& file) const {
  return repo_dir(name) / fs::path(file.path);
}

std::optional<fs::path> Store::find_copy(const ModelName& name, const RepoFile& file) const {
  const fs::path own = store_path(name, file);
  if (has_size(own, file.size)) return own;
  for (const fs::path& extra : extra_) {
    for (const fs::path& dir : repo_copies(extra, name)) {
      if (has_size(dir / file.path, file.size)) return dir / file.path;
    }
    const fs::path by_name = extra / fs::path(file.path).filename();
    if (has_size(by_name, file.size)) return by_name;
  }
  return std::nullopt;
}

std::optional<fs::path> Store::find_by_file_name(const RepoFile& file) const {
  for (const fs::path& extra : extra_) {
    const fs::path by_name = extra / fs::path(file.path).filename();
    if (has_size(by_name, file.size)) return by_name;
  }
  return std::nullopt;
}

std::optional<LocalModel> Store::find_local(const ModelName& name) const {
  if (auto local = pick_in(repo_dir(name), name, true)) return local;
  for (const fs::path& extra : extra_) {
    for (const fs::path& dir : repo_copies(extra, name)) {
      if (auto local = pick_in(dir, name, false)) return local;
    }
  }
  return std::nullopt;
}

std::vector<StoredModel> Store::list() const {
  std::vector<StoredModel> out;
  std::error_code ec;
  if (!fs::exists(root_, ec)) return out;
  if (!fs::is_directory(root_, ec)) {
    throw Error("store", "the model store '" + root_.string() + "' is not a folder");
  }
  std::vector<fs::path> repos;
  for (fs::directory_iterator org(root_, ec); !ec && org != fs::directory_iterator();
       org.increment(ec)) {
    std::error_code e2;
    if (!org->is_directory(e2)) continue;
    for (fs::directory_iterator repo(org->path(), e2); !e2 && repo != fs::directory_iterator();
         repo.increment(e2)) {
      std::error_code e3;
      if (repo->is_directory(e3)) repos.push_back(repo->path());
    }
  }
  if (ec)
    throw Error("store", "cannot read the model store '" + root_.string() + "': " + ec.message());
  std::sort(repos.begin(), repos.end());
  for (const fs::path& dir : repos) {
    const std::string repo_id =
        dir.parent_path().filename().string() + "/" + dir.filename().string();
    const std::vector<RepoFile> files = files_under(dir);
    std::map<std::string, bool> covered;
    for (const ModelFiles& m : gguf_models(files)) {
      StoredModel s{
          repo_id, m.quant, m.total_size(), static_cast<int>(m.files.size()), dir / m.first_path(),
          false};
      for (const RepoFile& f : m.files) covered[f.path] = true;
      out.push_back(std::move(s));
    }
    // Downloads in progress, and parts of a split model whose other parts are missing.
    for (const RepoFile& f : files) {
      const bool partial = ends_with(f.path, std::string(".gguf") + std::string(kPartial));
      const bool orphan = ends_with(f.path, ".gguf") && !covered.count(f.path);
      if (!partial && !orphan) continue;
      std::string path = f.path;
      if (partial) path.resize(path.size() - kPartial.size());
      out.push_back(StoredModel{repo_id, quant_of(path), f.size, 1, dir / f.path, true});
    }
  }
  return out;
}

std::vector<fs::path> Store::remove(const ModelName& name) const {
  std::vector<fs::path> removed;
  const fs::path dir = repo_dir(name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return removed;
  std::vector<fs::path> doomed;
  if (name.quant.empty()) {
    for (const RepoFile& f : files_under(dir)) doomed.push_back(dir / f.path);
  } else {
    ModelFiles picked;
    try {
      picked = pick_model(files_under(dir), name);
    } catch (const Error&) {
      return removed;
    }
    for (const RepoFile& f : picked.files) {
      doomed.push_back(dir / f.path);
      fs::path partial = dir / (f.path + std::string(kPartial));
      if (fs::exists(partial, ec)) doomed.push_back(partial);
    }
  }
  for (const fs::path& p : doomed) {
    if (!fs::remove(p, ec) || ec) {
      throw Error("store", "cannot remove '" + p.string() +
                               "': " + (ec ? ec.message() : std::string("it is gone")));
    }
    removed.push_back(p);
    remove_empty_parents(p, root_);
  }
  return removed;
}

}  // namespace herd::store
