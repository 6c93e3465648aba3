// Where a node keeps model weights it was sent, and how models are recognised: by the
// XXH3-128 content hash of the whole GGUF file (of a split model's files), so a node that has the
// same file under any name maps it instead of receiving it, and a second start finds what the first
// received.
//
// Layout under the cache directory ($XDG_CACHE_HOME/herd, else ~/.cache/herd):
//   hashes/<xxh64 of the absolute path>   "size mtime_ns hash" memo of a file's hash
//   models/<model hash>/<shard key>.gguf  a shard's tensors (a rank's cuts of them) with the
//                                         model's metadata
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/assignment.h"
#include "net/messages.h"

namespace herd::cluster {

// $XDG_CACHE_HOME/herd, else $HOME/.cache/herd. Throws herd::Error when neither is set.
std::filesystem::path default_cache_dir();

// 32 hex digits, high half first.
std::string to_hex(const net::ContentHash& hash);

// The content hash of a file, read in blocks (the file is not mapped, so hashing a model
// does not make it resident). When cache_dir is not empty the result is remembered there,
// keyed by the file's absolute path, size and modification time, so a second call costs a
// stat. Throws herd::Error naming the file when it cannot be read.
net::ContentHash file_content_hash(const std::filesystem::path& path,
                                   const std::filesystem::path& cache_dir);

// The content hash of a model in `paths` (gguf::File::paths: one file, or a split model's
// files in order): its file's, or the XXH3-128 of its files' hashes in order, so a split
// model is known by all of its bytes. Each file's hash is remembered as above.
net::ContentHash model_content_hash(const std::vector<std::string>& paths,
                                    const std::filesystem::path& cache_dir);

// The models with files under cache_dir/models: their content hashes (32 hex digits, as
// to_hex), the most recently written first. Empty when there are none or the directory
// cannot be read. What `herd node` advertises on the LAN (net/discovery.h).
std::vector<std::string> cached_models(const std::filesystem::path& cache_dir);

// The cached file holding exactly the tensors of `a` (names, types and shapes) of the
// model `model_hash`, cut to a's slice: a tensor-parallel rank's file is never taken for
// the whole of those tensors, nor for another rank's cut of the same shapes.
std::filesystem::path shard_cache_path(const std::filesystem::path& cache_dir,
                                       const net::ContentHash& model_hash, const Assignment& a);

}  // namespace herd::cluster
