// herd nodes [--key FILE] [--all] [--discover-ms N] [--json]
// The nodes advertising themselves on the LAN (DNS-SD, `_herd._tcp`: net/discovery.h) with
// their profiles: those of this key's cluster (what `--peers auto` would use), or every one
// with --all. A table, or a JSON array with --json.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "net/discovery.h"
#include "plan/rank_memory.h"

namespace herd::cli {
namespace {

struct NodesArgs {
  ClusterFlags flags;  // --key and --discover-ms
  bool all = false;
  bool json = false;
};

nlohmann::json to_json(const net::DiscoveredNode& n) {
  return {{"name", n.advert.name},
          {"address", n.endpoint()},
          {"host", n.host},
          {"instance", n.instance},
          {"cluster", n.advert.cluster},
          {"version", n.advert.version},
          {"cores", n.advert.cores},
          {"free_memory_bytes", n.advert.free_memory_bytes},
          {"bandwidth_gbs", n.advert.bandwidth_gbs},
          {"models", n.advert.models},
          {"n_models", n.advert.n_models},
          {"id", n.advert.id}};
}

std::string models_text(const net::NodeAdvert& a) {
  if (a.n_models == 0) return "-";
  std::string text = std::to_string(a.n_models);
  if (!a.models.empty()) text += " (" + a.models.front() + (a.n_models > 1 ? ", ...)" : ")");
  return text;
}

void print_table(const std::vector<net::DiscoveredNode>& nodes) {
  std::printf("%-24s %-21s %5s %10s %9s %-16s %-43s %s\n", "NAME", "ADDRESS", "CORES", "FREE MEM",
              "BANDWIDTH", "CLUSTER", "ID", "MODELS");
  for (const net::DiscoveredNode& n : nodes) {
    char bw[32];
    std::snprintf(bw, sizeof bw, "%.1f GB/s", n.advert.bandwidth_gbs);
    std::printf("%-24s %-21s %5lld %10s %9s %-16s %-43s %s\n", n.advert.name.c_str(),
                n.endpoint().c_str(), static_cast<long long>(n.advert.cores),
                memory_text(n.advert.free_memory_bytes).c_str(), bw, n.advert.cluster.c_str(),
                n.advert.id.empty() ? "-" : n.advert.id.c_str(), models_text(n.advert).c_str());
  }
}

void run_nodes(const NodesArgs& args) {
  const std::shared_ptr<const net::ClusterKey> key = args.flags.key();
  net::BrowseOptions browse;
  browse.wait = net::Millis(args.flags.discover_ms);
  if (!args.all) browse.cluster = net::cluster_id(key.get());
  const std::vector<net::DiscoveredNode> nodes = net::browse_nodes(browse);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const net::DiscoveredNode& n : nodes) out.push_back(to_json(n));
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  print_table(nodes);
  if (nodes.empty()) {
    std::fprintf(stderr, "herd nodes: no node %s seen on the LAN in %d ms\n",
                 args.all ? "" : ("of cluster " + browse.cluster).c_str(), args.flags.discover_ms);
  }
}

}  // namespace

void add_nodes(CLI::App& app) {
  auto* cmd = app.add_subcommand("nodes", "List the herd nodes seen on the LAN (DNS-SD)");
  auto args = std::make_shared<NodesArgs>();
  cmd->add_option("--key", args->flags.key_file,
                  "Cluster key file: list that cluster's nodes (default: $HERD_KEY; none: the "
                  "nodes without a key)");
  cmd->add_flag("--all", args->all, "Every node seen, of any cluster");
  cmd->add_option("--discover-ms", args->flags.discover_ms, "How long to look for nodes (ms)")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  cmd->add_flag("--json", args->json, "Print a JSON array instead of a table");
  cmd->callback([args] { run_nodes(*args); });
}

}  // namespace herd::cli
