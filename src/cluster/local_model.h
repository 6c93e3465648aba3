// Where a node finds, on its own disk, the model a LOAD asks for, before it asks the
// coordinator for tensors: a copy in its own model store under the name the coordinator
// gave (store/store.h: the store, then the read-only HERD_MODEL_PATH folders; never a
// download), then the coordinator's file at the hinted path (a shared disk, or the same
// machine). A file is taken only when its content hash is the LOAD's: a name is never
// trusted alone.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "net/messages.h"
#include "net/transport.h"
#include "store/store.h"

namespace herd::cluster {

// The file of this node's store that `name` names, at the size the coordinator's file has;
// nullopt when there is none or the name is not of a repository ("org/repo"). Without a
// repository (the coordinator opened a path) the file's base name in the extra folders.
// Files only: nothing is opened or hashed.
std::optional<std::filesystem::path> find_own_copy(const store::Store& store,
                                                   const net::StoreName& name);

// A model file a node maps instead of receiving tensors.
struct LocalModelFile {
  std::filesystem::path path;  // the (first) file; a split model's others lie beside it
  std::string source;          // for the log: "this node's store (<path>)", "the model file"
};

// Where the LOAD's model is on this machine: `own_store`'s copy of request.store_name
// (when both are there), else the file at request.model_path_hint, each only when its
// content hash (file_content_hash's, remembered under cache_dir) is request.model_hash.
// A copy that is another model, or cannot be opened, is logged and passed over. nullopt:
// neither, and the node asks for tensors.
std::optional<LocalModelFile> find_local_model(const net::Load& request,
                                               const std::optional<store::Store>& own_store,
                                               const std::filesystem::path& cache_dir,
                                               const net::LogFn& log);

}  // namespace herd::cluster
