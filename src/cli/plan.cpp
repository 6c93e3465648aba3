// herd plan --model M [--peers HOST:PORT,...|auto] [--no-local] [--parallel ...] [--ctx N] [--json]
//           [--node-profile FILE.json ...]
// How a model would be split across nodes, without loading it: the plan as a table, or as
// JSON ({"nodes": [...], "plan": {...}}) with --json. Node 0 is this machine (profiled now:
// cores, available memory, measured read bandwidth). Peers are asked for their profiles
// over the network; --node-profile files (one profile object or an array of them, as
// `herd plan --json` prints under "nodes") can stand for them instead, for what-if plans;
// with --peers as well, the profiles are the peers' in order and take their addresses.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cluster/peers.h"
#include "engine/runner.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "net/tcp_transport.h"
#include "plan/local_profile.h"
#include "plan/plan_model.h"
#include "plan/plan_table.h"
#include "plan/planner.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace herd::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::vector<std::string> peers;
  std::vector<std::string> profile_files;
  bool no_local = false;
  std::string parallel = "auto";
  std::string moe = "auto";
  int64_t n_ctx = 0;
  int64_t n_seq = 1;
  double headroom = 0.9;
  double bandwidth_gbs = 0;
  std::string name;
  bool json = false;
  ClusterFlags key;  // only --key, --discover-ms and the security flags are used
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("plan", "cannot read node profile '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<NodeProfile> peer_profiles(const PlanArgs& args) {
  std::vector<NodeProfile> peers;
  for (const std::string& path : args.profile_files) {
    for (NodeProfile& p : node_profiles_from_text(read_text(path), path))
      peers.push_back(std::move(p));
  }
  if (args.peers.empty()) return peers;
  const std::shared_ptr<const net::ClusterKey> key = args.key.key();
  const std::vector<std::string> addresses =
      resolve_peers(args.peers, key.get(), args.key.discover_ms, stderr);
  if (peers.empty()) {
    // Ask the nodes themselves: connect, read their PROFILE, say goodbye.
    net::TcpTransportOptions t;
    t.auth.node_name = "herd-plan";
    t.auth.key = key;
    t.auth.identity = args.key.security.identity();
    t.auth.allowed_ids = args.key.security.allowed_ids();
    t.auth.plaintext = args.key.security.insecure;
    net::TcpTransport transport(t);
    for (cluster::Peer& peer : cluster::connect_peers(transport, addresses, net::Millis(5000))) {
      peer.connection->close();
      peers.push_back(std::move(peer.profile));
    }
    return peers;
  }
  if (peers.size() != addresses.size()) {
    throw Error("plan", std::to_string(addresses.size()) + " peers but " +
                            std::to_string(peers.size()) + " node profiles");
  }
  for (size_t i = 0; i < peers.size(); ++i) peers[i].address = addresses[i];
  return peers;
}

void run_plan(const PlanArgs& args) {
  const gguf::File file = gguf::File::open(args.model);
  const ModelInfo info = read_model_info(file);
  const PlanModel model = plan_model_from(info, file);

  PlanOptions options;
  parse_parallel(args.parallel, options);
  options.moe = parse_moe_mode(args.moe);
  options.n_ctx = args.n_ctx > 0 ? std::min(args.n_ctx, info.hp.n_ctx)
                                 : std::min(info.hp.n_ctx, engine::kDefaultMaxCtx);
  options.n_seq = args.n_seq;
  options.use_local = !args.no_local;
  options.memory_headroom = args.headroom;

  std::vector<NodeProfile> nodes;
  LocalProfileOptions local;
  local.name = args.name;
  // Under --no-local this machine only coordinates: its speed does not matter.
  local.bandwidth_gbs = args.no_local && args.bandwidth_gbs <= 0 ? 1.0 : args.bandwidth_gbs;
  local.measure_matmul = local.bandwidth_gbs <= 0;
  {
    ThreadPool pool;
    nodes.push_back(measure_local_profile(pool, local));
  }
  for (NodeProfile& peer : peer_profiles(args)) nodes.push_back(std::move(peer));

  const Plan p = plan(model, nodes, options);
  if (args.json) {
    nlohmann::json out = {{"nodes", nlohmann::json::array()}, {"plan", to_json(p)}};
    for (const NodeProfile& n : nodes) out["nodes"].push_back(to_json(n));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s", plan_table(p, model, nodes, options).c_str());
  }
}

}  // namespace

void add_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Show how a model would be split across nodes");
  auto args = std::make_shared<PlanArgs>();
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("--peers", args->peers,
                  "Other nodes, HOST:PORT,... or auto (every node of this key's cluster seen on "
                  "the LAN); asked for their profiles, unless --node-profile files stand for them")
      ->delimiter(',');
  cmd->add_option("--discover-ms", args->key.discover_ms,
                  "How long --peers auto looks for nodes (ms)")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  cmd->add_option("--node-profile", args->profile_files,
                  "JSON file with a node profile or an array of them, standing for peers "
                  "(repeatable)");
  cmd->add_option("--key", args->key.key_file,
                  "Cluster key file for asking --peers (default: $HERD_KEY)");
  args->key.security.add_to(*cmd);
  cmd->add_flag("--no-local", args->no_local, "This machine coordinates but holds no layers");
  cmd->add_option("--parallel", args->parallel, "auto, pipeline, tensor or pipeline:P,tensor:T")
      ->capture_default_str();
  cmd->add_option("--moe", args->moe, "MoE layers: auto, expert-parallel or split-experts")
      ->capture_default_str();
  cmd->add_option("-c,--ctx", args->n_ctx,
                  "Context length (default: the model's, at most " +
                      std::to_string(engine::kDefaultMaxCtx) + ")");
  cmd->add_option("--seqs", args->n_seq, "Sequences the KV cache holds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  cmd->add_option("--headroom", args->headroom, "Share of each node's free memory a plan may use")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--bandwidth", args->bandwidth_gbs,
                  "This machine's memory bandwidth in GB/s (default: measure it)");
  cmd->add_option("--name", args->name, "This machine's node name (default: the host name)");
  cmd->add_flag("--json", args->json, "Print the nodes and the plan as JSON");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace herd::cli
