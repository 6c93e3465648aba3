// `herd pull`'s work: a model name to files in the store. Lists the repository (the hub's
// tree API, every page), picks the model's file(s) (hf_listing.h), takes each from the
// store or an extra folder when a copy of the listed size is there, else downloads it
// (downloader.h) from {endpoint}/{org}/{repo}/resolve/{revision}/{path}.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "store/downloader.h"
#include "store/hf_listing.h"
#include "store/store.h"

namespace herd::store {

struct PullOptions {
  std::string endpoint = "https://huggingface.co";  // $HF_ENDPOINT: a mirror's base URL
  std::string revision = "main";
  HttpOptions http;  // $HF_TOKEN goes in http.token
  // Before each file: the file, where it is taken from (a copy on disk) or goes, and
  // whether it is downloaded.
  std::function<void(const RepoFile&, const fs::path&, bool download)> on_file;
};

// The repository's files. Throws herd::Error "[store] ..." naming the repository: not
// found (404), access denied (401/403: HF_TOKEN), another status, a malformed listing.
std::vector<RepoFile> fetch_listing(const ModelName& name, const PullOptions& options);

// The model `name` names, in the store (or found in an extra folder) once this returns.
// Throws herd::Error as fetch_listing, pick_model and download_file do.
LocalModel pull(const Store& store, const ModelName& name, const PullOptions& options);

// {endpoint}/{org}/{repo}/resolve/{revision}/{path}, each path component percent-encoded.
std::string file_url(const PullOptions& options, const ModelName& name, const std::string& path);

}  // namespace herd::store
