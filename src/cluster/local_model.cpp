#include "cluster/local_model.h"

#include "cluster/weight_cache.h"
#include "gguf/reader.h"
#include "util/error.h"

namespace herd::cluster {

namespace fs = std::filesystem;

std::optional<fs::path> find_own_copy(const store::Store& store, const net::StoreName& name) {
  const store::RepoFile file{name.file, name.size, ""};
  if (name.repo.empty()) return store.find_by_file_name(file);
  const std::optional<store::ModelName> repo = store::parse_model_name(name.repo);
  if (!repo || !repo->quant.empty()) return std::nullopt;
  return store.find_copy(*repo, file);
}

namespace {

// Whether the model at `path` (a split model's files with it) has content hash `hash`.
// Opened to learn its files: cheap, the headers only. A file that cannot be opened or read
// is logged as `what` and is not the model.
bool holds_model(const fs::path& path, const net::ContentHash& hash, const fs::path& cache_dir,
                 const std::string& what, const net::LogFn& log) {
  try {
    const std::vector<std::string> paths = gguf::File::open(path.string()).paths();
    if (model_content_hash(paths, cache_dir) == hash) return true;
    if (log) log("not using " + what + " " + path.string() + ": another model (content hash)");
  } catch (const Error& e) {
    if (log) log("not using " + what + ": " + e.what());
  }
  return false;
}

}  // namespace

std::optional<LocalModelFile> find_local_model(const net::Load& request,
                                               const std::optional<store::Store>& own_store,
                                               const fs::path& cache_dir, const net::LogFn& log) {
  if (own_store && request.store_name) {
    if (std::optional<fs::path> own = find_own_copy(*own_store, *request.store_name)) {
      if (holds_model(*own, request.model_hash, cache_dir, "this node's copy", log)) {
        return LocalModelFile{*own, "this node's store (" + own->string() + ")"};
      }
    }
  }
  if (!request.model_path_hint.empty()) {
    std::error_code ec;
    const fs::path hint(request.model_path_hint);
    if (fs::is_regular_file(hint, ec) &&
        holds_model(hint, request.model_hash, cache_dir, "the coordinator's model file", log)) {
      return LocalModelFile{hint, "the model file"};
    }
  }
  return std::nullopt;
}

}  // namespace herd::cluster
