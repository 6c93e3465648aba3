// Options every command that runs a model shares (--model, --threads, --ctx, ...), and
// the loading that follows from them. Later: --peers, --no-local, --parallel.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/runner.h"

namespace herd::cli {

struct ModelOptions {
  std::string model;
  int threads = 0;
  int64_t n_ctx = 0;
  std::string isa = "auto";

  void add_to(CLI::App& cmd);
  // Loads the model as the one-stage plan. Throws herd::Error naming the problem.
  std::unique_ptr<engine::LocalRunner> open(int64_t n_seq = 1) const;
};

}  // namespace herd::cli
