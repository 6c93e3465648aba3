#include "cli/model_options.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/mpi_ranks.h"
#include "cli/store_options.h"
#include "cluster/cluster_runner.h"
#include "net/activations.h"
#include "plan/plan.h"
#include "util/error.h"
#include "util/progress.h"

namespace herd::cli {

void ClusterFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--peers", peers,
                 "Nodes to use besides this process (HOST:PORT,...; auto: every node of this "
                 "key's cluster seen on the LAN)")
      ->delimiter(',');
  cmd.add_option("--discover-ms", discover_ms, "How long --peers auto looks for nodes (ms)")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  cmd.add_flag("--no-local", no_local, "This process coordinates only and holds no layers");
  cmd.add_option("--parallel", parallel,
                 "How to split the model: auto, pipeline, tensor, pipeline:P,tensor:T")
      ->capture_default_str();
  cmd.add_option("--moe", moe, "MoE experts: auto, expert-parallel, split-experts")
      ->capture_default_str();
  cmd.add_option("--key", key_file, "Cluster key file (default: $HERD_KEY; none: insecure mode)");
  cmd.add_option("--transport", transport,
                 "How nodes are reached: tcp (--peers), or mpi (run under mpirun: rank 0 "
                 "coordinates, ranks 1..n-1 serve as nodes)")
      ->check(CLI::IsMember({"tcp", "mpi"}))
      ->capture_default_str();
  cmd.add_option("--rank-bandwidth", rank_bandwidth_gbs,
                 "With --transport mpi: memory bandwidth (GB/s) ranks 1..n-1 report instead of "
                 "measuring it (ranks sharing a machine; as herd node --bandwidth)")
      ->check(CLI::Range(0.01, 1e5));
  cmd.add_option("--rank-matmul", rank_matmul_gflops,
                 "With --transport mpi: Q4_0 matrix speed (GFLOP/s) ranks 1..n-1 report instead "
                 "of measuring it (as herd node --matmul)")
      ->check(CLI::Range(0.01, 1e6));
  cmd.add_option("--spare", spares,
                 "Nodes to keep out of the plan, each standing by with another node's weights "
                 "loaded to take its place when it is lost (the last N that answer)")
      ->check(CLI::Range(0, 4096));
  cmd.add_option("--test-link-delay-us", test_link_delay_us,
                 "Test only: every frame this process sends is late by this much (a slower link)")
      ->group("")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  security.add_to(cmd);
}

void SecurityFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--identity", identity_file,
                 "This end's identity file (default: $XDG_CONFIG_HOME/herd/identity, else "
                 "~/.config/herd/identity; created on first use)");
  cmd.add_option("--allow-ids", allow_ids_file,
                 "Accept only peers whose node id is in this file (one id per line, as "
                 "`herd node --show-id` prints; '#' comments)");
  cmd.add_flag("--insecure", insecure,
               "Send frames unencrypted (a trusted link only; every node and the coordinator "
               "must say the same)");
}

std::shared_ptr<const net::NodeIdentity> SecurityFlags::identity() const {
  const std::filesystem::path path =
      identity_file.empty()
          ? net::NodeIdentity::default_path(std::getenv("XDG_CONFIG_HOME"), std::getenv("HOME"))
          : std::filesystem::path(identity_file);
  return std::make_shared<const net::NodeIdentity>(net::NodeIdentity::load_or_create(path));
}

std::shared_ptr<const net::AllowList> SecurityFlags::allowed_ids() const {
  if (allow_ids_file.empty()) return nullptr;
  return std::make_shared<const net::AllowList>(net::AllowList::load_file(allow_ids_file));
}

std::shared_ptr<const net::ClusterKey> ClusterFlags::key() const {
  std::optional<net::ClusterKey> key = net::resolve_cluster_key(key_file, std::getenv("HERD_KEY"));
  if (!key) return nullptr;
  return std::make_shared<const net::ClusterKey>(std::move(*key));
}

bool wants_discovery(const std::vector<std::string>& peers) {
  return std::find(peers.begin(), peers.end(), "auto") != peers.end();
}

std::vector<std::string> discover_peers(const std::string& cluster, int discover_ms) {
  net::BrowseOptions browse;
  browse.wait = net::Millis(discover_ms);
  browse.cluster = cluster;
  std::vector<std::string> out;
  for (const net::DiscoveredNode& node : net::browse_nodes(browse)) out.push_back(node.endpoint());
  return out;
}

std::vector<std::string> resolve_peers(const std::vector<std::string>& peers,
                                       const net::ClusterKey* key, int discover_ms,
                                       FILE* progress) {
  if (!wants_discovery(peers)) return peers;
  std::vector<std::string> out;
  for (const std::string& p : peers) {
    if (p != "auto" && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  const std::string cluster = net::cluster_id(key);
  const std::vector<std::string> found = discover_peers(cluster, discover_ms);
  if (found.empty() && out.empty()) {
    throw Error("cli", "--peers auto: no node of cluster " + cluster + " seen on the LAN in " +
                           std::to_string(discover_ms) + " ms (same --key? --discover-ms?)");
  }
  std::string list;
  for (const std::string& p : found) {
    list += (list.empty() ? "" : ", ") + p;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  if (progress) {
    std::fprintf(progress, "herd: --peers auto: %zu node%s of cluster %s on the LAN%s%s\n",
                 found.size(), found.size() == 1 ? "" : "s", cluster.c_str(),
                 found.empty() ? "" : ": ", list.c_str());
  }
  return out;
}

namespace {

// The weights going to a device: a bar on a terminal, a line per 10% otherwise.
engine::UploadProgress upload_progress_bar(FILE* out) {
  auto bar = std::make_shared<std::unique_ptr<Progress>>();
  return [out, bar](size_t done, size_t total) {
    if (!*bar) *bar = std::make_unique<Progress>(out, "weights to the device", total);
    (*bar)->update(done);
    if (done >= total) (*bar)->finish();
  };
}

}  // namespace

void ModelOptions::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model,
                 "GGUF model file, or a model name org/repo[:QUANT] (from the store; pulled when "
                 "missing: herd pull)")
      ->required();
  cmd.add_option("-t,--threads", threads,
                 "Threads (default: the performance cores, else all cores)");
  cmd.add_option("-c,--ctx", n_ctx,
                 "Context length (default: the model's, at most " +
                     std::to_string(engine::kDefaultMaxCtx) + ")");
  cmd.add_option("--isa", isa, "Kernel instruction set: auto, scalar, avx2, avx512")
      ->capture_default_str();
  cmd.add_option("--mla-prefill", mla_prefill,
                 "Multi-head latent attention of a prompt: auto (each head's keys and values "
                 "decompressed from the latent when that is fewer operations), absorbed, "
                 "decompressed")
      ->capture_default_str();
  cmd.add_option("--device", device,
                 "Where the model runs: auto (a GPU that can run it, else the CPU), cpu, vulkan, "
                 "vulkan:N (herd devices lists them)")
      ->capture_default_str();
  cmd.add_option("--experts", experts,
                 "An MoE model on a GPU: cpu keeps the routed experts on the CPU and the rest on "
                 "the GPU; auto does so when the model outgrows the GPU's memory; device")
      ->capture_default_str();
  cmd.add_option("--device-layers", device_layers,
                 "A model on a GPU: its first N layers there, the rest on the CPU (default: all, "
                 "or as many as fit when a dense model outgrows the GPU)");
  cmd.add_option("--wire-dtype", wire_dtype,
                 "Activations between stages and tensor-parallel all-reduces on the wire: f32 "
                 "(exact), f16 (half the bytes) or q8_0 (8-bit blocks, 34/128 of the bytes)")
      ->capture_default_str();
  cmd.add_flag("--no-stage-links", no_stage_links,
               "Send every stage's activations through this process, not from stage to stage "
               "(for comparison)");
  cluster.add_to(cmd);
}

engine::LocalOptions ModelOptions::local_options(int64_t n_seq) const {
  engine::LocalOptions options;
  options.threads = threads;
  options.n_ctx = n_ctx;
  options.n_seq = n_seq;
  if (isa == "auto" || isa == "avx512") {
    options.isa_limit = kernels::Isa::kAvx512;
  } else if (isa == "avx2") {
    options.isa_limit = kernels::Isa::kAvx2;
  } else if (isa == "scalar") {
    options.isa_limit = kernels::Isa::kScalar;
  } else {
    throw Error("cli", "unknown --isa '" + isa + "' (auto, scalar, avx2, avx512)");
  }
  options.device = device;
  options.experts = experts;
  options.device_layers = device_layers;
  options.mtp = mtp;
  options.upload_progress = upload_progress_bar(stderr);
  if (mla_prefill == "auto") {
    options.mla_decompress_min_tokens = -1;
  } else if (mla_prefill == "absorbed") {
    options.mla_decompress_min_tokens = 0;
  } else if (mla_prefill == "decompressed") {
    options.mla_decompress_min_tokens = 2;
  } else {
    throw Error("cli",
                "unknown --mla-prefill '" + mla_prefill + "' (auto, absorbed, decompressed)");
  }
  return options;
}

std::unique_ptr<engine::ModelRunner> ModelOptions::open(int64_t n_seq) const {
  const engine::LocalOptions local = local_options(n_seq);
  const net::WireDType wire = net::parse_wire_dtype(wire_dtype);
  if (!cluster.distributed()) {
    if (cluster.spares > 0) throw Error("cli", "--spare needs nodes: give --peers");
    auto runner = engine::LocalRunner::open(resolve_model_arg(model), local);
    if (!runner->device_note().empty()) {
      std::fprintf(stderr, "herd: %s\n", runner->device_note().c_str());
    }
    return runner;
  }
  cluster::ClusterOptions o;
  if (cluster.transport == "mpi") {
    // Ranks other than 0 serve as nodes inside join_mpi_job and never return here.
    MpiCoordinator job = join_mpi_job(*this);
    o.transport = std::move(job.transport);
    o.peers = std::move(job.peers);
    // Ranks start with rank 0 and measure their machine before they answer (TCP nodes were
    // started, and had measured, before the coordinator dialled them): a loaded machine
    // running several ranks may take seconds.
    o.connect_timeout = net::Millis(120000);
  } else {
    o.key = cluster.key();
    o.identity = cluster.security.identity();
    o.allowed_ids = cluster.security.allowed_ids();
    o.plaintext = cluster.security.insecure;
    o.peers = resolve_peers(cluster.peers, o.key.get(), cluster.discover_ms, stderr);
  }
  if (cluster.transport != "mpi" && wants_discovery(cluster.peers)) {
    // Asked again when the pod is re-formed (on the coordinator's mender thread): a daemon
    // that went away since start-up means no new nodes, not a failed recovery.
    o.discover = [id = net::cluster_id(o.key.get()), ms = cluster.discover_ms] {
      try {
        return discover_peers(id, ms);
      } catch (const Error&) {
        return std::vector<std::string>{};
      }
    };
  }
  parse_parallel(cluster.parallel, o.plan);
  o.plan.moe = parse_moe_mode(cluster.moe);
  o.plan.use_local = !cluster.no_local;
  o.local = local;
  o.wire_dtype = wire;
  o.stage_links = !no_stage_links;
  o.spares = cluster.spares;
  o.test_link_delay = std::chrono::microseconds(cluster.test_link_delay_us);
  o.progress = stderr;
  // A model name is resolved (pulled if need be) here, after join_mpi_job: by the
  // coordinator alone, which ships the nodes their tensors.
  ResolvedModel resolved = resolve_model(model);
  o.store_name = store_name ? store_name : std::move(resolved.store_name);
  return cluster::ClusterRunner::open(resolved.path, o);
}

}  // namespace herd::cli
