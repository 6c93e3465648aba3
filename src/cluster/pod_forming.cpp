// Forming a pod: connecting to its nodes (and measuring the links once), profiling this
// process, planning (or keeping a plan with spares in lost nodes' places), and loading
// every shard, on the nodes and here. form_pod runs these steps in order.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/cluster_runner_state.h"
#include "cluster/peers.h"
#include "cluster/shipping.h"
#include "cluster/weight_cache.h"
#include "engine/backend.h"
#include "plan/candidates.h"
#include "plan/local_profile.h"
#include "plan/plan_check.h"
#include "plan/planner.h"
#include "util/error.h"
#include "util/progress.h"

namespace herd::cluster {
namespace fs = std::filesystem;

namespace {

constexpr net::Millis kLoadTimeout{3600000};
// How long a node may take to answer when a pod is formed again.
constexpr net::Millis kReformConnectTimeout{2000};

uint64_t random_token() {
  const net::Nonce nonce = net::random_nonce();
  uint64_t token;
  std::memcpy(&token, nonce.data(), sizeof token);
  return token;
}

// Who dials whom in a tensor-parallel stage's ring: rank r links to rank r+1. A node
// listens, this process does not: the link is dialled by r, unless r+1 is this process.
// With two ranks the one link serves both directions (RingSpec's `next`).
void link_ring(StageRunner& s, const std::vector<NodeProfile>& nodes) {
  const size_t t = s.ranks.size();
  if (t < 2) return;
  for (size_t r = 0; r < (t == 2 ? 1 : t); ++r) {
    RankRunner& from = s.ranks[r];
    RankRunner& to = s.ranks[(r + 1) % t];
    if (to.node != 0) {
      from.assignment.ring.next.connect = nodes[static_cast<size_t>(to.node)].address;
    } else if (t == 2) {
      to.assignment.ring.next.connect = nodes[static_cast<size_t>(from.node)].address;
    } else {
      to.assignment.ring.prev.connect = nodes[static_cast<size_t>(from.node)].address;
    }
  }
}

// Consecutive stages whose ranks all run on nodes talk directly: rank 0 of stage i dials
// every rank of stage i+1 (FlowSpec); a stage next to one this process runs talks to this
// process. Marks the chains: each stage's chain_end, and the stages run by their head.
void link_stages(std::vector<std::unique_ptr<StageRunner>>& stages,
                 const std::vector<NodeProfile>& nodes, uint64_t token, bool enabled) {
  for (size_t i = 0; i < stages.size(); ++i) {
    StageRunner& s = *stages[i];
    s.chain_end = i;
    s.all_remote = std::all_of(s.ranks.begin(), s.ranks.end(),
                               [](const RankRunner& rank) { return rank.node != 0; });
  }
  for (size_t i = 0; enabled && i + 1 < stages.size(); ++i) {
    StageRunner& from = *stages[i];
    StageRunner& to = *stages[i + 1];
    if (!from.all_remote || !to.all_remote) continue;
    std::vector<std::string> next;
    for (const RankRunner& rank : to.ranks) {
      next.push_back(nodes[static_cast<size_t>(rank.node)].address);
    }
    for (RankRunner& rank : from.ranks) {
      rank.assignment.flow.token = token;
      rank.assignment.flow.next = next;
    }
    for (RankRunner& rank : to.ranks) {
      rank.assignment.flow.token = token;
      rank.assignment.flow.prev = 1;
    }
    to.chained = true;
  }
  for (size_t i = stages.size(); i-- > 1;) {
    if (stages[i]->chained) stages[i - 1]->chain_end = stages[i]->chain_end;
  }
}

// Hybrid (--parallel pipeline:P,tensor:T) on fewer nodes than it asks for, when a pod is
// formed again: T ranks per stage and as many stages as the nodes allow; too few for one
// stage: the planner's choice.
PlanOptions relaxed_for(PlanOptions po, size_t n_nodes_with_local) {
  if (po.mode != PlanOptions::Mode::kHybrid) return po;
  const auto n_nodes = static_cast<int>(n_nodes_with_local) - (po.use_local ? 0 : 1);
  if (n_nodes < po.pipeline_stages * po.tensor_ranks) {
    if (n_nodes >= po.tensor_ranks) {
      po.pipeline_stages = n_nodes / po.tensor_ranks;
    } else {
      po.mode = PlanOptions::Mode::kAuto;
    }
  }
  return po;
}

// Plans on every node but the last `wanted` ones, which become spares (plan/spares.h);
// fewer when the others cannot hold the model (the event says so).
std::vector<Shadow> plan_spared(ClusterRunner::State& st, ClusterRunner::Impl& r,
                                const PlanModel& model, const PlanOptions& po, bool tolerant,
                                int wanted) {
  SparePlan spared =
      plan_with_spares(r.nodes, wanted, po, [&](const std::vector<NodeProfile>& planned) {
        const PlanOptions options = tolerant ? relaxed_for(po, planned.size()) : po;
        return plan_fastest(model, planned, r.links.first(planned.size()), options,
                            st.predict_costs());
      });
  r.plan = std::move(spared.plan);
  if (spared.n_spares < wanted) {
    st.event("spares", "--spare " + std::to_string(wanted) + ": " +
                           std::to_string(spared.n_spares) + " spare" +
                           (spared.n_spares == 1 ? "" : "s") + ": the model needs the other nodes");
  }
  return spared.spares;
}

}  // namespace

// How this process dials nodes over TCP: its name and the security options.
net::TcpTransportOptions tcp_options(const ClusterOptions& o) {
  net::TcpTransportOptions t;
  t.auth.node_name = o.name;
  t.auth.key = o.key;
  t.auth.identity = o.identity;
  t.auth.allowed_ids = o.allowed_ids;
  t.auth.plaintext = o.plaintext;
  return t;
}

void ClusterRunner::Impl::load_remote(RankRunner& s, net::Load load) {
  load.plan_json = to_json(s.assignment).dump();
  net::send_message(*s.remote, 0, load);
  for (;;) {
    net::Frame frame = s.remote->recv_frame(kLoadTimeout);
    switch (frame.header.type) {
      case net::MessageType::READY:
        return;
      case net::MessageType::WANT: {
        std::optional<Progress> bar;
        ShipProgress progress;
        if (options.progress) {
          bar.emplace(options.progress, "shipping weights to '" + s.node_name + "'",
                      tensor_bytes(s.assignment));
          progress = [&](uint64_t done, uint64_t) { bar->update(done); };
        }
        ship_weights(*s.remote, file, info, s.assignment, progress);
        if (bar) bar->finish();
        break;
      }
      case net::MessageType::ERROR: {
        const net::ErrorReply e = net::decode_error(frame.payload());
        throw Error("cluster", "node '" + s.node_name +
                                   "' could not load its shard: " + net::printable(e.message));
      }
      default:
        net::throw_unexpected(frame, net::MessageType::READY, s.remote->peer_name());
    }
  }
}

namespace {

// ---- form_pod's steps, in the order it runs them ----

// A pod with its thread pool and its way to reach nodes, and nothing else yet.
std::unique_ptr<ClusterRunner::Impl> new_pod(ClusterRunner::State& st) {
  const ClusterOptions& options = st.options;
  auto impl = std::make_unique<ClusterRunner::Impl>(st.file, st.info);
  ClusterRunner::Impl& r = *impl;
  r.options = options;
  r.pool = std::make_unique<ThreadPool>(options.local.threads);

  r.transport = options.transport;
  if (!r.transport) {
    net::TcpTransportOptions t = tcp_options(options);
    t.test_send_delay = options.test_link_delay;
    r.transport = std::make_shared<net::TcpTransport>(t);
  }
  return impl;
}

// Node 0: this process's profile, measured once per runner.
void add_local_node(ClusterRunner::State& st, ClusterRunner::Impl& r) {
  const ClusterOptions& options = st.options;
  LocalProfileOptions local;
  local.name = "local";
  local.bandwidth_gbs = options.local_bandwidth_gbs;
  // A coordinator that holds no layers needs no speed (and no 256 MiB probe buffer).
  if (!options.plan.use_local && local.bandwidth_gbs <= 0) local.bandwidth_gbs = 1;
  // Nodes measure their matmul speed; so does a coordinator that may hold layers beside them.
  local.measure_matmul = local.bandwidth_gbs <= 0 && !options.peers.empty();
  local.device = options.local.device;
  local.measure_device = local.measure_matmul;
  if (!st.local_profile) st.local_profile = measure_local_profile(*r.pool, local);
  r.nodes.push_back(*st.local_profile);
}

// The peers that let the connection in, in the order given. tolerant: the others are named
// in `unreachable`; otherwise the first is an error.
std::vector<Peer> connect_to(const ClusterOptions& options, net::Transport& transport,
                             const std::vector<std::string>& peers, bool tolerant,
                             std::vector<std::string>& unreachable) {
  std::vector<Peer> reached;
  if (tolerant) {
    for (const std::string& address : peers) {
      std::string why;
      // A node that lets the connection in but never answers (stopped, cut off) must not
      // hold a recovery up for long.
      const net::Millis timeout = std::min(options.connect_timeout, kReformConnectTimeout);
      if (std::optional<Peer> peer = try_connect_peer(transport, address, timeout, why)) {
        reached.push_back(std::move(*peer));
      } else {
        unreachable.push_back(address + " (" + why + ")");
      }
    }
  } else {
    reached = connect_peers(transport, peers, options.connect_timeout);
  }
  return reached;
}

// The reached peers become the pod's nodes 1.., each with its link from this process.
// Gives the connection to each node ([0], this process, none).
std::vector<std::shared_ptr<net::Connection>> add_peers(ClusterRunner::State& st,
                                                        ClusterRunner::Impl& r,
                                                        std::vector<Peer>& reached, bool tolerant,
                                                        std::vector<std::string>& unreachable) {
  const ClusterOptions& options = st.options;
  std::vector<std::shared_ptr<net::Connection>> connections(1);
  r.links.to_node.push_back(LinkProfile{});
  for (Peer& peer : reached) {
    // Each link once per process (a pod formed again reuses the figures): PROBEs before LOAD.
    const std::string& address = peer.profile.address;
    auto known = st.links.find(address);
    if (known == st.links.end() && options.measure_links) {
      try {
        known = st.links.emplace(address, measure_link(*peer.connection)).first;
      } catch (const Error& e) {
        if (!tolerant) throw;
        unreachable.push_back(address + " (" + e.what() + ")");
        peer.connection->close();
        continue;
      }
    }
    r.links.to_node.push_back(known != st.links.end() ? known->second : assumed_link());
    r.nodes.push_back(std::move(peer.profile));
    connections.push_back(std::move(peer.connection));
  }
  return connections;
}

// The links between the pod's nodes (stage links and rings run on them).
void measure_links_between(ClusterRunner::State& st, ClusterRunner::Impl& r,
                           const std::vector<std::shared_ptr<net::Connection>>& connections,
                           bool tolerant) {
  if (st.options.measure_links && r.nodes.size() > 2) {
    std::vector<NodeEnd> ends(r.nodes.size());
    for (size_t i = 1; i < r.nodes.size(); ++i) {
      ends[i] = {r.nodes[i].name, r.nodes[i].address, connections[i]};
    }
    try {
      r.links.between = measure_node_links(
          ends, st.node_links, [&](const std::string& text) { st.event("links", text); });
    } catch (const Error& e) {
      if (!tolerant) throw;
      st.event("links", std::string("links between nodes not measured: ") + e.what());
    }
  }
}

// The pod's plan (r.plan, r.plan_options) and its spares: `kept` when it is given and the
// nodes can hold it, else the planner's.
std::vector<Shadow> plan_pod(ClusterRunner::State& st, ClusterRunner::Impl& r, bool tolerant,
                             const KeptPlan* kept) {
  const ClusterOptions& options = st.options;
  PlanOptions po = options.plan;
  po.n_ctx = options.local.n_ctx > 0 ? std::min(options.local.n_ctx, r.info.hp.n_ctx)
                                     : std::min(r.info.hp.n_ctx, engine::kDefaultMaxCtx);
  po.n_seq = options.local.n_seq;
  const PlanModel& model = st.model;
  std::vector<Shadow> shadows;
  bool planned = false;
  if (kept) {
    try {
      check_plan(kept->plan, model, r.nodes, po);  // a spare may offer less memory
      r.plan = kept->plan;
      shadows = kept->spares;
      planned = true;
    } catch (const Error& e) {
      st.event("spares", std::string("the spares cannot take the lost nodes' places: ") + e.what() +
                             "; planning again");
    }
  }
  if (!planned) shadows = plan_spared(st, r, model, po, tolerant, options.spares);
  r.plan_options = po;
  return shadows;
}

// Nodes the plan does not use, and are not spares, are let go at once.
void let_go_unused(const ClusterRunner::Impl& r, const std::vector<Shadow>& shadows,
                   const std::vector<std::shared_ptr<net::Connection>>& connections) {
  std::vector<bool> used(r.nodes.size(), false);
  for (const Stage& stage : r.plan.stages) {
    for (const Rank& rank : stage.ranks) used[static_cast<size_t>(rank.node)] = true;
  }
  for (const Shadow& shadow : shadows) used[static_cast<size_t>(shadow.node)] = true;
  for (size_t i = 1; i < connections.size(); ++i) {
    if (!used[i]) connections[i]->close();
  }
}

// The plan's stages, each rank with its assignment and connection (watched by the
// heartbeat), their rings and stage links; then the spares.
void make_stages(ClusterRunner::Impl& r, const std::vector<Shadow>& shadows,
                 const std::vector<std::shared_ptr<net::Connection>>& connections) {
  const ClusterOptions& options = r.options;
  r.heartbeat = std::make_unique<net::Heartbeat>(options.heartbeat);
  const uint64_t ring_token = random_token();
  for (size_t i = 0; i < r.plan.stages.size(); ++i) {
    auto s = std::make_unique<StageRunner>();
    const Stage& stage = r.plan.stages[i];
    s->index = static_cast<int>(i);
    for (size_t k = 0; k < stage.ranks.size(); ++k) {
      RankRunner rank;
      rank.node = stage.ranks[k].node;
      rank.node_name = rank.node == 0 ? "local" : r.nodes[static_cast<size_t>(rank.node)].name;
      rank.assignment = assignment_for(r.plan, static_cast<int>(i), static_cast<int>(k), r.file,
                                       r.info, options.wire_dtype);
      rank.assignment.ring.token = ring_token;
      if (rank.node != 0) {
        rank.remote = connections[static_cast<size_t>(rank.node)];
        r.heartbeat->watch(rank.remote);
      }
      s->name += (k > 0 ? "+" : "") + rank.node_name;
      s->ranks.push_back(std::move(rank));
    }
    link_ring(*s, r.nodes);
    s->stats.node = s->name;
    s->stats.layer_begin = stage.layer_begin;
    s->stats.layer_end = stage.layer_end;
    r.stages.push_back(std::move(s));
  }
  link_stages(r.stages, r.nodes, random_token(), options.stage_links);
  for (const Shadow& shadow : shadows) {
    RankRunner spare;
    spare.node = shadow.node;
    spare.node_name = r.nodes[static_cast<size_t>(shadow.node)].name;
    spare.assignment =
        assignment_for(r.plan, shadow.stage, shadow.rank, r.file, r.info, options.wire_dtype);
    spare.assignment.standby = true;
    spare.assignment.device.reset();  // planned for another node: the spare's own --device
    spare.remote = connections[static_cast<size_t>(shadow.node)];
    r.heartbeat->watch(spare.remote);
    r.spares.push_back(std::move(spare));
  }
}

// The model's content hash (of all its files), which a node's LOAD names: computed once, when a pod
// first has a remote rank or a spare.
net::ContentHash content_hash_for(ClusterRunner::State& st, const ClusterRunner::Impl& r) {
  bool any_remote = !r.spares.empty();
  for (auto& s : r.stages) {
    for (RankRunner& rank : s->ranks) any_remote = any_remote || rank.remote != nullptr;
  }
  if (any_remote && !st.content_hash) {
    fs::path cache;
    try {
      cache = default_cache_dir();
    } catch (const Error&) {
    }
    st.content_hash = model_content_hash(st.file.paths(), cache);
  }
  return st.content_hash.value_or(net::ContentHash{});
}

// What every node's LOAD says of the model: its hash, this machine's path to it, and its
// name in this machine's store (else its file's base name), for a node to find it on its own.
net::Load model_load(ClusterRunner::State& st, const ClusterRunner::Impl& r) {
  net::Load load;
  load.model_hash = content_hash_for(st, r);
  load.model_path_hint = fs::absolute(st.path).string();
  net::StoreName name;
  if (r.options.store_name) {
    name = *r.options.store_name;
  } else {
    std::error_code ec;
    name.file = fs::path(st.path).filename().string();
    name.size = fs::file_size(st.path, ec);
    if (ec) name.size = 0;
  }
  if (net::valid_store_name(name)) load.store_name = std::move(name);
  return load;
}

// What the loading threads report: each failure, and the nodes that could not load.
struct LoadErrors {
  explicit LoadErrors(std::vector<std::string>& failed) : failed_loads(failed) {}

  std::vector<std::string>& failed_loads;  // addresses
  std::mutex mutex;
  std::vector<std::string> texts;

  void record(const std::string& e) {
    std::lock_guard<std::mutex> lock(mutex);
    texts.push_back(e);
  }
};

// This process's ranks: their shards, and the ring links it dials.
void load_local_ranks(ClusterRunner::Impl& r, LoadErrors& errors) {
  const kernels::Isa isa = kernels::best_isa(kernels::detect_cpu(), r.options.local.isa_limit);
  for (auto& s : r.stages) {
    for (RankRunner& rank : s->ranks) {
      if (rank.remote) continue;
      engine::ShardOptions so;
      so.n_ctx = r.plan.n_ctx;
      so.n_seq = r.plan.n_seq;
      so.isa = isa;
      so.n_threads = r.pool->size();
      try {
        // Where the plan put the part (this machine's GPU, all of it or split with its CPU,
        // or its CPU); under --device auto a GPU that fails to take it leaves the CPU.
        const std::string device = rank.assignment.device.value_or(r.options.local.device);
        so.device = engine::choose_device(device, *r.info.arch, r.info.hp, nullptr);
        rank.part = engine::open_rank(r.file, r.info, rank.assignment.shard, so,
                                      planned_placement(rank.assignment),
                                      r.options.local.device == "auto", nullptr);
        if (rank.assignment.n_ranks > 1) {
          // This process never listens: it dials both of its links (link_ring says so).
          rank.ring = join_ring(
              *r.transport, rank.assignment,
              [](uint32_t, net::Millis) -> std::shared_ptr<net::Connection> {
                throw Error("cluster", "the coordinator cannot accept ring links");
              },
              net::Millis(30000));
          r.heartbeat->watch(rank.ring->next());
          r.heartbeat->watch(rank.ring->prev());
        }
      } catch (const std::exception& e) {
        errors.record(e.what());
      }
    }
  }
}

// Remote ranks load in parallel (each node reads or receives its own weights) while this
// process loads its own and dials its ring links.
void load_pod(ClusterRunner::State& st, ClusterRunner::Impl& r,
              std::vector<std::string>& failed_loads) {
  const net::Load model = model_load(st, r);
  std::vector<std::thread> loaders;
  LoadErrors errors(failed_loads);
  for (auto& s : r.stages) {
    for (RankRunner& rank : s->ranks) {
      if (!rank.remote) continue;
      loaders.emplace_back([&r, &rank, &model, &errors] {
        try {
          r.load_remote(rank, model);
        } catch (const std::exception& e) {
          {
            std::lock_guard<std::mutex> lock(errors.mutex);
            errors.failed_loads.push_back(r.nodes[static_cast<size_t>(rank.node)].address);
          }
          errors.record(e.what());
          rank.remote->fail(e.what());  // ring neighbours waiting for it give up at once
        }
      });
    }
  }
  // A spare that cannot load is let go: the pod runs without it.
  std::vector<std::string> spare_errors(r.spares.size());
  for (size_t i = 0; i < r.spares.size(); ++i) {
    loaders.emplace_back([&r, &model, &spare_errors, i] {
      try {
        r.load_remote(r.spares[i], model);
      } catch (const std::exception& e) {
        spare_errors[i] = e.what();
        r.spares[i].remote->fail(e.what());
      }
    });
  }
  load_local_ranks(r, errors);
  for (auto& l : loaders) l.join();
  for (size_t i = r.spares.size(); i-- > 0;) {
    if (spare_errors[i].empty()) continue;
    st.event("spares", "spare '" + r.spares[i].node_name + "' let go: " + spare_errors[i]);
    r.spares[i].remote->close();
    r.spares.erase(r.spares.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // Each recorded error already names its module ("[cluster] node 'x' could not load ...",
  // "[engine] ..." of a local rank): passed on as it is, not prefixed a second time.
  if (!errors.texts.empty()) throw Error(errors.texts.front());
}

// Each stage's worker, and a chain's receiver, start.
void start_workers(ClusterRunner::Impl& r) {
  for (auto& s : r.stages) {
    StageRunner* stage = s.get();
    if (stage->chained) continue;  // its head's threads run it
    s->worker = std::thread([&r, stage] { r.worker(*stage); });
    if (stage->all_remote) s->receiver = std::thread([&r, stage] { r.receiver(*stage); });
  }
}

}  // namespace

std::unique_ptr<ClusterRunner::Impl> form_pod(ClusterRunner::State& st,
                                              const std::vector<std::string>& peers, bool tolerant,
                                              std::vector<std::string>& unreachable,
                                              std::vector<std::string>& failed_loads,
                                              const KeptPlan* kept) {
  std::unique_ptr<ClusterRunner::Impl> impl = new_pod(st);
  ClusterRunner::Impl& r = *impl;
  // Node 0 is this process; then the peers in the order given.
  add_local_node(st, r);
  std::vector<Peer> reached = connect_to(st.options, *r.transport, peers, tolerant, unreachable);
  const bool every_peer_answered = reached.size() == peers.size();
  const std::vector<std::shared_ptr<net::Connection>> connections =
      add_peers(st, r, reached, tolerant, unreachable);
  measure_links_between(st, r, connections, tolerant);
  const std::vector<Shadow> shadows =
      plan_pod(st, r, tolerant, every_peer_answered ? kept : nullptr);
  let_go_unused(r, shadows, connections);
  make_stages(r, shadows, connections);
  load_pod(st, r, failed_loads);
  start_workers(r);
  return impl;
}

}  // namespace herd::cluster
