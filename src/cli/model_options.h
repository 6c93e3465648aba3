// Options every command that runs a model shares (--model, --threads, --ctx, and the
// cluster's --peers, --no-local, --parallel, --wire-dtype, --key), and the loading that
// follows from them: the one-stage plan in this process, or a plan across nodes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/runner.h"
#include "net/auth.h"

namespace herd::cli {

struct ClusterFlags {
  std::vector<std::string> peers;
  bool no_local = false;
  std::string parallel = "auto";
  std::string moe = "auto";
  std::string key_file;

  void add_to(CLI::App& cmd);
  bool distributed() const { return !peers.empty() || no_local; }
  // --key FILE, else HERD_KEY, else null (insecure mode).
  std::shared_ptr<const net::ClusterKey> key() const;
};

struct ModelOptions {
  std::string model;
  int threads = 0;
  int64_t n_ctx = 0;
  std::string isa = "auto";
  std::string wire_dtype = "f32";
  bool no_stage_links = false;
  ClusterFlags cluster;

  void add_to(CLI::App& cmd);
  engine::LocalOptions local_options(int64_t n_seq) const;
  // Loads the model: in this process, or across --peers. Throws herd::Error naming the
  // problem. Loading progress goes to stderr.
  std::unique_ptr<engine::ModelRunner> open(int64_t n_seq = 1) const;
};

}  // namespace herd::cli
