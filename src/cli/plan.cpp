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
#include "cli/store_options.h"
#include "cluster/link_probe.h"
#include "cluster/peers.h"
#include "engine/runner.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "net/activations.h"
#include "net/tcp_transport.h"
#include "plan/candidates.h"
#include "plan/local_profile.h"
#include "plan/plan_model.h"
#include "plan/plan_table.h"
#include "plan/planner.h"
#include "plan/predict.h"
#include "plan/spares.h"
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
  std::string device = "auto";  // this machine's GPU, as herd run --device takes it
  int64_t n_ctx = 0;
  int64_t n_seq = 1;
  double headroom = 0.9;
  double bandwidth_gbs = 0;
  std::string name;
  bool json = false;
  bool explain = false;
  double link_latency_us = 100;  // one way, of every node's link (until links are measured)
  double link_gbits = 1;
  int64_t test_link_delay_us = 0;
  std::string wire_dtype = "f32";
  int spare = 0;
  ClusterFlags key;  // only --key, --discover-ms and the security flags are used
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("plan", "cannot read node profile '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The peers' profiles; `links` gets the measured link to each peer asked over the network,
// and `between` the links among them (node indices: this machine 0, peers from 1).
std::vector<NodeProfile> peer_profiles(const PlanArgs& args, std::vector<LinkProfile>& links,
                                       std::map<std::pair<int, int>, LinkProfile>& between) {
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
    t.test_send_delay = std::chrono::microseconds(args.test_link_delay_us);
    t.auth.identity = args.key.security.identity();
    t.auth.allowed_ids = args.key.security.allowed_ids();
    t.auth.plaintext = args.key.security.insecure;
    net::TcpTransport transport(t);
    std::vector<cluster::NodeEnd> ends(1);
    for (cluster::Peer& peer : cluster::connect_peers(transport, addresses, net::Millis(5000))) {
      links.push_back(cluster::measure_link(*peer.connection));
      ends.push_back({peer.profile.name, peer.profile.address, peer.connection});
      peers.push_back(std::move(peer.profile));
    }
    cluster::NodeLinks known;
    between = cluster::measure_node_links(ends, known, [](const std::string& text) {
      std::fprintf(stderr, "herd plan: %s\n", text.c_str());
    });
    for (size_t i = 1; i < ends.size(); ++i) ends[i].connection->close();
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
  local.device = args.no_local ? "cpu" : args.device;
  local.measure_device = local.bandwidth_gbs <= 0;
  {
    ThreadPool pool;
    nodes.push_back(measure_local_profile(pool, local));
  }
  std::vector<LinkProfile> measured;
  std::map<std::pair<int, int>, LinkProfile> between;
  for (NodeProfile& peer : peer_profiles(args, measured, between)) nodes.push_back(std::move(peer));

  // Links measured when the peers were asked; else (profile files) as the flags say.
  Links links;
  LinkProfile link;
  link.rtt_seconds = 2 * args.link_latency_us * 1e-6;
  link.send_bytes_per_s = link.receive_bytes_per_s = args.link_gbits * 1e9 / 8;
  links.to_node.assign(nodes.size(), link);
  for (size_t i = 0; i < measured.size(); ++i) links.to_node[i + 1] = measured[i];
  links.between = between;
  PredictCosts costs;
  costs.wire_bytes_per_value = net::wire_bytes_per_value(net::parse_wire_dtype(args.wire_dtype));
  // With --spare N the last N nodes stand by (plan/spares.h), as a coordinator would keep them.
  const SparePlan spared =
      plan_with_spares(nodes, args.spare, options, [&](const std::vector<NodeProfile>& planned) {
        return plan_fastest(model, planned, links.first(planned.size()), options, costs);
      });
  const Plan& p = spared.plan;
  std::vector<std::string> spare_lines;
  for (const Spare& s : spared.spares) {
    const Rank& r = p.stages[static_cast<size_t>(s.stage)].ranks[static_cast<size_t>(s.rank)];
    spare_lines.push_back("spare " + nodes[static_cast<size_t>(s.node)].name +
                          " stands by for stage " + std::to_string(s.stage) + " rank " +
                          std::to_string(s.rank) + " (node " +
                          nodes[static_cast<size_t>(r.node)].name + ")");
  }
  if (spared.n_spares < args.spare) {
    spare_lines.push_back("--spare " + std::to_string(args.spare) + ": " +
                          std::to_string(spared.n_spares) + ": the model needs the other nodes");
  }
  const Prediction predicted = predict(p, model, nodes, links, options, costs);
  if (args.json) {
    nlohmann::json out = {{"nodes", nlohmann::json::array()},
                          {"plan", to_json(p)},
                          {"prediction",
                           {{"decode_tokens_per_s", predicted.decode_tokens_per_s},
                            {"prefill_tokens_per_s", predicted.prefill_tokens_per_s},
                            {"decode_weights_seconds", predicted.decode_compute_seconds},
                            {"decode_allreduce_seconds", predicted.decode_allreduce_seconds},
                            {"decode_wire_seconds", predicted.decode_wire_seconds}}},
                          {"spares", nlohmann::json::array()}};
    for (const Spare& s : spared.spares) {
      out["spares"].push_back({{"node", nodes[static_cast<size_t>(s.node)].name},
                               {"stage", s.stage},
                               {"rank", s.rank}});
    }
    for (const NodeProfile& n : nodes) out["nodes"].push_back(to_json(n));
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s", plan_table(p, model, nodes, options).c_str());
  for (size_t i = 0; i < measured.size(); ++i) {
    std::printf("link to %-12s %s\n", nodes[i + 1].name.c_str(),
                cluster::link_text(measured[i]).c_str());
  }
  for (const auto& [pair, link] : between) {
    const std::string ends = nodes[static_cast<size_t>(pair.first)].name + " - " +
                             nodes[static_cast<size_t>(pair.second)].name;
    std::printf("link %-15s %s\n", ends.c_str(), cluster::link_text(link).c_str());
  }
  for (const std::string& line : spare_lines) std::printf("%s\n", line.c_str());
  std::printf("predicted: %s\n", prediction_text(predicted).c_str());
  if (!args.explain) return;
  if (measured.empty()) {
    std::printf(
        "\ncandidates, predicted on links of %.0f us one way and %g Gbit/s (docs/plan.md, "
        "\"Predictions\"):\n",
        args.link_latency_us, args.link_gbits);
  } else {
    std::printf("\ncandidates, predicted on the measured links (docs/plan.md, \"Predictions\"):\n");
  }
  const std::vector<Candidate> all = plan_candidates(model, nodes, links, options, costs);
  for (size_t i = 0; i < all.size(); ++i) {
    const Candidate& c = all[i];
    if (c.plan) {
      const bool chosen = c.plan->stages == p.stages;
      std::printf("%3zu. %-44s %s%s\n", i + 1, c.name.c_str(),
                  prediction_text(c.prediction).c_str(), chosen ? "  <- the plan above" : "");
    } else {
      std::printf("%3zu. %-44s does not fit: %s\n", i + 1, c.name.c_str(), c.why_not.c_str());
    }
  }
  if (!all.empty() && all[0].plan) {
    const std::string why = why_fastest(all);
    std::printf("fastest predicted: %s%s%s\n", all[0].name.c_str(), why.empty() ? "" : ", ",
                why.c_str());
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
  cmd->add_option("--device", args->device,
                  "This machine's GPU for the plan: auto (the first GPU), cpu (none), vulkan:N")
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
  cmd->add_flag("--explain", args->explain,
                "List the ways to split the model with their predicted speeds, fastest first");
  cmd->add_option("--link-latency-us", args->link_latency_us,
                  "One-way latency of every node's link, for the predictions (microseconds)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--test-link-delay-us", args->test_link_delay_us,
                  "Test only: every frame this process sends is late by this much")
      ->group("")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  cmd->add_option("--spare", args->spare,
                  "Keep the last N nodes out of the plan as spares, as run and serve would")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--wire-dtype", args->wire_dtype,
                  "Activations on the wire, for the predictions: f32, f16 or q8_0")
      ->capture_default_str();
  cmd->add_option("--link-gbits", args->link_gbits,
                  "Bandwidth of every node's link, for the predictions (Gbit/s)")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e4));
  cmd->callback([args] {
    args->model = resolve_model_arg(args->model);
    run_plan(*args);
  });
}

}  // namespace herd::cli
