// What `herd pull`, `herd ls`, `herd rm` and every --model share: where the store is
// (--models-dir, else $HERD_MODELS_DIR, else $XDG_DATA_HOME/herd/models, else
// ~/.local/share/herd/models), the read-only folders searched first ($HERD_MODEL_PATH, a
// ':'-separated list), the hub ($HF_ENDPOINT, $HF_TOKEN), and a download's progress on
// stderr (a bar on a terminal, a line per 10% or per 10 s otherwise).
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "net/messages.h"
#include "store/pull.h"
#include "store/store.h"

namespace herd::cli {

struct StoreFlags {
  std::string models_dir;  // empty: the environment's default

  void add_to(CLI::App& cmd);
  store::Store open() const;
};

// Pull options from the environment, reporting to `out` (stderr).
store::PullOptions pull_options(FILE* out);

// A --model argument as a file to open: a path that exists stays as it is; a model name
// (org/repo[:QUANT]) is looked up in the store and the extra folders, and pulled when it is
// in none (said on stderr). Anything else stays as it is (the loader says it cannot open
// it); a split model is its first file (which opens the others). Throws herd::Error when a
// pull fails.
std::string resolve_model_arg(const std::string& arg);

// A --model argument resolved as resolve_model_arg does, with the name it had in the store.
struct ResolvedModel {
  std::string path;
  std::optional<net::StoreName> store_name;  // a model name's repository, file and size
};
ResolvedModel resolve_model(const std::string& arg);

}  // namespace herd::cli
