// Options every command that runs a model shares (--model, --threads, --ctx, and the
// cluster's --peers, --no-local, --parallel, --wire-dtype, --key, --discover-ms), and the
// loading that follows from them: the one-stage plan in this process, or a plan across
// nodes. `--peers auto` stands for every node of the key's cluster seen on the LAN.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/runner.h"
#include "net/auth.h"
#include "net/discovery.h"
#include "net/messages.h"

namespace herd::cli {

// --identity, --allow-ids and --insecure: who this end is, whom it accepts, and whether
// frames are encrypted (net/auth.h). Shared by `herd node` and every command that dials
// nodes.
struct SecurityFlags {
  std::string identity_file;   // empty: net::NodeIdentity::default_path()
  std::string allow_ids_file;  // empty: any node id
  bool insecure = false;       // plaintext frames

  void add_to(CLI::App& cmd);
  // The identity file's identity, created on first use. Throws herd::Error naming the file.
  std::shared_ptr<const net::NodeIdentity> identity() const;
  // The allow-list, or null without --allow-ids. Throws herd::Error naming the file.
  std::shared_ptr<const net::AllowList> allowed_ids() const;
};

struct ClusterFlags {
  std::vector<std::string> peers;
  bool no_local = false;
  std::string parallel = "auto";
  std::string moe = "auto";
  std::string key_file;
  int discover_ms = net::kDefaultDiscoverMs;
  std::string transport = "tcp";  // or "mpi": the nodes are the ranks of an mpirun job
  // What MPI ranks 1..n-1 report instead of measuring (herd node's --bandwidth, --matmul);
  // 0: measured.
  double rank_bandwidth_gbs = 0;
  double rank_matmul_gflops = 0;
  int spares = 0;
  int64_t test_link_delay_us = 0;
  SecurityFlags security;

  void add_to(CLI::App& cmd);
  bool distributed() const { return !peers.empty() || no_local || transport == "mpi"; }
  // --key FILE, else HERD_KEY, else null (insecure mode).
  std::shared_ptr<const net::ClusterKey> key() const;
};

// True when `peers` holds "auto".
bool wants_discovery(const std::vector<std::string>& peers);
// The nodes of the cluster with this id (net::cluster_id) seen on the LAN within
// discover_ms, as "host:port". Throws herd::Error when discovery cannot run.
std::vector<std::string> discover_peers(const std::string& cluster, int discover_ms);
// `peers` with "auto" replaced by discover_peers(cluster_id(key)): the named ones first, no
// endpoint twice. Says what it found on `progress` (null: silent). Throws herd::Error when
// discovery cannot run, or finds no node and no peer is named.
std::vector<std::string> resolve_peers(const std::vector<std::string>& peers,
                                       const net::ClusterKey* key, int discover_ms, FILE* progress);

struct ModelOptions {
  std::string model;
  // The name `model` had in the store when a caller resolved it already (serve does, for
  // its API's model id): what a pod's nodes look for in their own stores.
  std::optional<net::StoreName> store_name;
  int threads = 0;
  int64_t n_ctx = 0;
  std::string isa = "auto";
  std::string mla_prefill = "auto";  // auto | absorbed | decompressed
  std::string device = "auto";       // auto | cpu | vulkan | vulkan:N
  std::string experts = "auto";      // auto | cpu | device (MoE on a GPU)
  int64_t device_layers = -1;        // layers on the GPU, the rest on the CPU; -1: auto
  std::string wire_dtype = "f32";
  bool no_stage_links = false;
  bool mtp = false;  // load the model's MTP head (LocalOptions::mtp): set by --mtp
  ClusterFlags cluster;

  void add_to(CLI::App& cmd);
  engine::LocalOptions local_options(int64_t n_seq) const;
  // Loads the model: in this process, or across --peers. Throws herd::Error naming the
  // problem. Loading progress goes to stderr.
  std::unique_ptr<engine::ModelRunner> open(int64_t n_seq = 1) const;
};

}  // namespace herd::cli
