// The model store: GGUF files pulled from a Hugging Face repository, kept as
// <root>/<org>/<repo>/<path in the repository> (a download in progress beside its final
// name as "<name>.partial"), and read-only extra folders searched before anything is
// downloaded (a NAS, another tool's copy). Lists and removes what it holds.
//
// The root: --models-dir, else $HERD_MODELS_DIR, else $XDG_DATA_HOME/herd/models, else
// ~/.local/share/herd/models. Extra folders: $HERD_MODEL_PATH (a ':'-separated list).
// In an extra folder a repository's file is found at <dir>/<org>/<repo>/<path>, in
// Hugging Face's own cache layout <dir>/models--<org>--<repo>/snapshots/*/<path>, or by its
// file name alone at <dir>/<name>, in that order; a copy counts only at the listed size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/hf_listing.h"

namespace herd::store {

namespace fs = std::filesystem;

// The default root from the environment's values (each may be null or empty). Throws
// herd::Error when neither XDG_DATA_HOME nor HOME is set.
fs::path default_root(const char* herd_models_dir, const char* xdg_data_home, const char* home);
// "a:b::c" -> {a, b, c} (empty entries skipped).
std::vector<fs::path> parse_path_list(std::string_view list);

// A model on disk: its files in part order (the first is what a loader opens).
struct LocalModel {
  ModelFiles model;  // paths relative to the repository
  std::vector<fs::path> paths;
  bool in_store = true;  // false: found in an extra folder
};

// One line of `herd ls`.
struct StoredModel {
  std::string repo_id;  // "org/repo"
  std::string quant;    // may be empty
  uint64_t size = 0;    // all parts
  int n_files = 1;
  fs::path path;         // the first part
  bool partial = false;  // a download not finished ("<name>.partial")
};

class Store {
 public:
  Store(fs::path root, std::vector<fs::path> extra)
      : root_(std::move(root)), extra_(std::move(extra)) {}

  const fs::path& root() const { return root_; }
  const std::vector<fs::path>& extra() const { return extra_; }

  fs::path repo_dir(const ModelName& name) const { return root_ / name.org / name.repo; }
  // Where the store keeps `file` (it may not be there yet).
  fs::path store_path(const ModelName& name, const RepoFile& file) const;
  // A complete copy of `file` already on disk (the store first, then the extra folders),
  // matched by name and size; nullopt when there is none.
  std::optional<fs::path> find_copy(const ModelName& name, const RepoFile& file) const;
  // A complete copy of a file known by its name alone (a model another machine opened by
  // path): <dir>/<file name> in each extra folder, at `file.size`; nullopt when none.
  std::optional<fs::path> find_by_file_name(const RepoFile& file) const;
  // The model `name` picks among the GGUF files of its repository already on disk (the
  // store's, then each extra folder's org/repo/ and Hugging Face cache copies), with no
  // network. nullopt when none of them holds exactly one match (the repository's listing
  // then decides, as `herd pull` does).
  std::optional<LocalModel> find_local(const ModelName& name) const;

  // Every model in the store (not the extra folders), by repository then path. Throws
  // herd::Error when the root exists but cannot be read.
  std::vector<StoredModel> list() const;
  // Removes the model `name` picks (with its .partial files), or with no quant every file
  // of the repository; returns the paths removed (empty: nothing matched). Empty folders
  // left behind go too. Never touches the extra folders.
  std::vector<fs::path> remove(const ModelName& name) const;

 private:
  fs::path root_;
  std::vector<fs::path> extra_;
};

}  // namespace herd::store
