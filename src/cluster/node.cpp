#include "cluster/node.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cluster/assignment.h"
#include "cluster/link_probe.h"
#include "cluster/local_model.h"
#include "cluster/ring_links.h"
#include "cluster/shipping.h"
#include "cluster/state_ops.h"
#include "cluster/weight_cache.h"
#include "engine/backend.h"
#include "engine/device_placement.h"
#include "engine/rank.h"
#include "engine/shard.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "net/activations.h"
#include "net/heartbeat.h"
#include "net/interfaces.h"
#include "net/tcp_transport.h"
#include "plan/local_profile.h"
#include "plan/rank_memory.h"
#include "util/cpu_info.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/thread_pool.h"

namespace herd::cluster {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// What a session has loaded: the file (mapped model or cached shard) and the rank that runs
// its part (declared after the file, whose mapping it points into).
struct Loaded {
  Assignment assignment;
  gguf::File file;
  ModelInfo info;
  std::unique_ptr<engine::Rank> rank;
  std::unique_ptr<RingAllReduce> ring;  // tensor-parallel ranks only
  // Stage links (assignment.h FlowSpec): the input comes over `prev` when there is one;
  // rank 0 sends its output over `next` (to every rank of the next stage) when there are
  // any, else to the coordinator.
  std::shared_ptr<net::Connection> prev;
  std::vector<std::shared_ptr<net::Connection>> next;
  // Snapshots and held copies of its slots' recurrent states (STATE), gone with the plan.
  engine::RecurrentStates states{};
};

// A stage link failed (a neighbour died or sent garbage): the loaded plan cannot run any
// more batches, but the session goes on (the coordinator may send a new LOAD).
class StageLinkError : public Error {
 public:
  using Error::Error;
};

void close_links(Loaded& loaded) {
  if (loaded.prev) loaded.prev->close();
  for (auto& link : loaded.next) link->close();
}

// A connection that arrives during a session is a ring link if its first frame, sent
// right after the handshake, is RING; a coordinator says nothing (it waits for our
// PROFILE), so silence this long means a second coordinator, which is told BUSY.
constexpr net::Millis kGreetingTimeout{1000};

// The KV cache a LOAD asks for must fit the model's context and this machine's memory
// (a coordinator's numbers are not trusted to be sane).
void check_cache_size(const Assignment& a, const HParams& hp) {
  if (a.n_ctx > hp.n_ctx) {
    throw Error("cluster", "context " + std::to_string(a.n_ctx) + " exceeds the model's " +
                               std::to_string(hp.n_ctx));
  }
  const int64_t layers = a.shard.layer_end - a.shard.layer_begin;
  const int64_t kv_heads = a.n_ranks > 1 && a.shard.slice.kv_head_end >= 0
                               ? a.shard.slice.kv_head_end - a.shard.slice.kv_head_begin
                               : hp.n_head_kv;
  // K and V in F16: 4 bytes per element pair.
  const double bytes = 4.0 * static_cast<double>(layers) * static_cast<double>(a.n_ctx) *
                       static_cast<double>(a.n_seq) * static_cast<double>(kv_heads) *
                       static_cast<double>(hp.head_dim);
  const double available = static_cast<double>(available_memory_bytes());
  if (available > 0 && bytes > available) {
    throw Error("cluster",
                "a KV cache of " + std::to_string(static_cast<int64_t>(bytes / 1048576)) +
                    " MiB (" + std::to_string(a.n_seq) + " x " + std::to_string(a.n_ctx) +
                    " positions) exceeds the " +
                    std::to_string(static_cast<int64_t>(available / 1048576)) + " MiB available");
  }
}

}  // namespace

struct NodeServer::Impl {
  NodeOptions options;
  std::shared_ptr<net::Transport> transport;  // a TcpTransport unless options.transport
  uint16_t port = 0;                          // the TcpTransport's
  std::unique_ptr<ThreadPool> pool;           // measures this machine at start-up, then let go
  int threads = 0;                            // its size: each loaded rank's pool has as many
  // Watches the coordinator and ring links: a coordinator that hangs or vanishes without a
  // goodbye ends its session within seconds instead of keeping the node busy.
  std::unique_ptr<net::Heartbeat> heartbeat =
      std::make_unique<net::Heartbeat>(net::HeartbeatOptions{});
  NodeProfile profile;
  std::atomic<bool> stopping{false};

  // Ring links other ranks dialled (their RING frame read), waiting for the session.
  std::mutex inbox_mutex;
  std::condition_variable inbox_changed;
  std::vector<std::pair<net::Ring, std::shared_ptr<net::Connection>>> ring_inbox;
  // Coordinators that connected while a session was ending, next in line.
  std::deque<std::shared_ptr<net::Connection>> waiting;
  std::atomic<bool> serving{false};  // a session runs

  void greet(std::shared_ptr<net::Connection> c, const std::string& busy_with);
  void answer_peer_probes(net::Connection& c, net::Frame first);
  net::PeerLink measure_peer(const net::PeerProbe& ask);
  std::shared_ptr<net::Connection> accept_ring_link(uint64_t token, uint32_t from_rank,
                                                    net::Millis timeout);

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  void session(const std::shared_ptr<net::Connection>& c);
  std::optional<Loaded> load(net::Connection& c, const net::Load& request);
  engine::DevicePlacement placement(const Assignment& a, const gguf::File& file,
                                    const ModelInfo& info, const engine::Device& device);
  void forward(net::Connection& c, const net::Frame& frame, Loaded& loaded,
               std::vector<float>& input, std::vector<float>& output, std::vector<uint8_t>& wire);
  void answer_state(net::Connection& c, const net::Frame& frame, std::optional<Loaded>& loaded);
};

NodeServer::NodeServer(NodeOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  if (s.options.cache_dir.empty()) s.options.cache_dir = default_cache_dir();
  s.pool = std::make_unique<ThreadPool>(s.options.threads);

  std::string address = s.options.address;
  if (s.options.transport) {
    s.transport = s.options.transport;
    if (s.options.name.empty()) s.options.name = address;
  } else {
    net::TcpTransportOptions t;
    t.auth.key = s.options.key;
    t.auth.node_name = s.options.name;
    t.auth.identity = s.options.identity;
    t.auth.allowed_ids = s.options.allowed_ids;
    t.auth.plaintext = s.options.plaintext;
    t.log = s.options.log;
    t.test_send_delay = s.options.test_link_delay;
    auto tcp = std::make_shared<net::TcpTransport>(t);
    net::ListenOptions listen;
    listen.host = s.options.host;
    listen.port = s.options.port;
    listen.insecure_listen = s.options.insecure_listen;
    tcp->listen(listen);
    s.options.name = tcp->node_name();  // "<host>:<port>" when none was given
    s.port = tcp->port();
    address = s.options.host + ":" + std::to_string(s.port);
    s.transport = std::move(tcp);
  }

  LocalProfileOptions p;
  p.name = s.options.name;
  p.address = address;
  p.bandwidth_gbs = s.options.bandwidth_gbs;
  p.measure_matmul = s.options.measure_matmul;
  p.matmul_gflops = s.options.matmul_gflops;
  p.device = s.options.device;
  p.measure_device = s.options.bandwidth_gbs <= 0;
  s.profile = measure_local_profile(*s.pool, p);
  if (s.options.memory_limit_bytes > 0) {
    s.profile.free_memory_bytes =
        std::min(s.profile.free_memory_bytes, s.options.memory_limit_bytes);
  }
  // Which links coordinators reach it over (a Thunderbolt bridge, Ethernet, loopback).
  const std::string links =
      s.options.transport
          ? std::string(s.transport->name())
          : net::interfaces_text(net::interfaces_for_host(s.options.host, net::list_interfaces()));
  s.log("node '" + s.options.name + "' listening on " + p.address +
        (links.empty() ? "" : " (" + links + ")"));
  s.log("node '" + s.options.name + "': " + cpu_cores_text(cpu_cores()) + ", " +
        std::to_string(s.pool->size()) + " threads, " +
        std::to_string(s.profile.free_memory_bytes >> 20) + " MiB available" +
        (s.profile.unified_memory
             ? " (unified memory: the model may use " +
                   memory_text(unified_model_limit(s.profile.total_memory_bytes)) + ")"
             : "") +
        ", " + std::to_string(static_cast<int>(s.profile.bandwidth_gbs)) + " GB/s, " +
        std::to_string(static_cast<int>(s.profile.matmul_gflops)) + " GFLOP/s q4_0");
  // A loaded rank has its own pool (engine/rank.h): this one's threads would only wait.
  s.threads = s.pool->size();
  s.pool.reset();
}

NodeServer::~NodeServer() = default;

uint16_t NodeServer::port() const {
  return impl_->port;
}

const NodeProfile& NodeServer::profile() const {
  return impl_->profile;
}

void NodeServer::stop() {
  impl_->stopping = true;
}

void NodeServer::run() {
  Impl& s = *impl_;
  std::shared_ptr<net::Connection> active;
  std::thread session;
  // Connections that come during a session (ring links, a second coordinator) are greeted
  // each on a thread of its own, joined once done: a long session keeps only live ones (a
  // peer connecting again and again no longer grows the node by a finished thread each time).
  struct Greeter {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Greeter> greeters;
  while (!s.stopping) {
    std::erase_if(greeters, [](Greeter& g) {
      if (!g.done->load()) return false;
      g.thread.join();
      return true;
    });
    std::shared_ptr<net::Connection> c = s.transport->accept(net::Millis(50));
    if (session.joinable() && !s.serving) {
      session.join();
      active.reset();
      if (s.options.one_session) break;
    }
    if (c && active) {
      // Another rank's ring link, or a second coordinator: the first frame says.
      auto done = std::make_shared<std::atomic<bool>>(false);
      greeters.push_back({std::thread([&s, c, busy_with = active->peer_name(), done] {
                            s.greet(c, busy_with);
                            *done = true;
                          }),
                          done});
      continue;
    }
    if (!c && !active) {
      // A coordinator that arrived while the previous session was ending.
      std::lock_guard<std::mutex> lock(s.inbox_mutex);
      if (!s.waiting.empty()) {
        c = std::move(s.waiting.front());
        s.waiting.pop_front();
      }
    }
    if (!c) continue;
    active = c;
    s.serving = true;
    session = std::thread([&s, c] {
      s.session(c);
      s.serving = false;
    });
  }
  if (active) active->fail("node '" + s.options.name + "' is stopping");
  if (session.joinable()) session.join();
  for (Greeter& g : greeters) g.thread.join();
}

void NodeServer::Impl::greet(std::shared_ptr<net::Connection> c, const std::string& busy_with) {
  try {
    // A ring link says RING at once; a coordinator says nothing (it waits for PROFILE).
    const auto deadline = Clock::now() + kGreetingTimeout;
    std::optional<net::Frame> frame;
    while (!frame && serving && !stopping && Clock::now() < deadline) {
      frame = c->try_recv_frame(net::Millis(20));
    }
    if (frame && frame->header.type == net::MessageType::PROBE) {
      answer_peer_probes(*c, std::move(*frame));  // another node measures its link to us
      c->close();
      return;
    }
    if (frame) {
      const net::Ring ring = net::expect_message<net::Ring>(*frame, c->peer_name());
      {
        std::lock_guard<std::mutex> lock(inbox_mutex);
        ring_inbox.emplace_back(ring, std::move(c));
      }
      inbox_changed.notify_all();
      return;
    }
    if (!serving && !stopping) {
      // The session it found has just ended (its coordinator said BYE): it is next.
      std::lock_guard<std::mutex> lock(inbox_mutex);
      waiting.push_back(std::move(c));
      return;
    }
    log("refused '" + c->peer_name() + "': busy serving '" + busy_with + "'");
    net::send_message(
        *c, 0,
        net::ErrorReply{net::ErrorCode::BUSY,
                        "node '" + options.name + "' is busy serving '" + busy_with + "'"});
  } catch (const std::exception& e) {
    log("dropped '" + c->peer_name() + "': " + e.what());
  }
  c->close();
}

namespace {

// The answer to a PROBE (cluster/link_probe.h): `reply_bytes` zeros, at once.
void answer_probe(net::Connection& c, const net::Frame& frame, std::vector<uint8_t>& zeros) {
  const net::Probe probe = net::decode_probe(frame.payload());
  zeros.resize(std::max<size_t>(zeros.size(), probe.reply_bytes));
  net::send_message(c, frame.header.id,
                    net::Probe{0, net::ConstBytes(zeros.data(), probe.reply_bytes)});
}

// How long a node measuring its link to this one may pause between PROBEs.
constexpr net::Millis kPeerProbeIdle{5000};

}  // namespace

// Another node, asked by the coordinator (PEER_PROBE), measures its link to this one: its
// PROBEs are answered until it closes the connection.
void NodeServer::Impl::answer_peer_probes(net::Connection& c, net::Frame first) {
  std::vector<uint8_t> zeros;
  try {
    answer_probe(c, first, zeros);
    while (std::optional<net::Frame> frame = c.try_recv_frame(kPeerProbeIdle)) {
      if (frame->header.type != net::MessageType::PROBE) break;
      answer_probe(c, *frame, zeros);
    }
  } catch (const Error&) {
    // It closed the connection: the measurement is over.
  }
}

// Dials the other node and measures the link as the coordinator measures its own.
net::PeerLink NodeServer::Impl::measure_peer(const net::PeerProbe& ask) {
  net::PeerLink answer;
  try {
    const net::Millis budget(ask.budget_ms);
    std::shared_ptr<net::Connection> peer =
        transport->connect(ask.address, std::max(budget, net::Millis(1000)));
    const LinkProfile link = measure_link(*peer, budget);
    peer->close();
    answer.reached = true;
    answer.rtt_seconds = link.rtt_seconds;
    answer.to_peer_bytes_per_s = link.send_bytes_per_s;
    answer.from_peer_bytes_per_s = link.receive_bytes_per_s;
  } catch (const Error& e) {
    answer.why = e.what();
  }
  return answer;
}

std::shared_ptr<net::Connection> NodeServer::Impl::accept_ring_link(uint64_t token,
                                                                    uint32_t from_rank,
                                                                    net::Millis timeout) {
  std::unique_lock<std::mutex> lock(inbox_mutex);
  std::shared_ptr<net::Connection> found;
  const bool arrived = inbox_changed.wait_for(lock, timeout, [&] {
    for (auto it = ring_inbox.begin(); it != ring_inbox.end(); ++it) {
      if (it->first.token == token && it->first.rank == from_rank) {
        found = std::move(it->second);
        ring_inbox.erase(it);
        return true;
      }
    }
    return stopping.load();
  });
  if (!arrived || !found) {
    throw Error("cluster", "rank " + std::to_string(from_rank) + " did not link within " +
                               std::to_string(timeout.count()) + " ms");
  }
  return found;
}

void NodeServer::Impl::session(const std::shared_ptr<net::Connection>& c) {
  log("coordinator '" + c->peer_name() + "' connected");
  heartbeat->watch(c);
  std::optional<Loaded> loaded;
  std::vector<float> input, output;
  std::vector<uint8_t> wire;
  std::vector<uint8_t> probe_reply;  // zeros: PROBE answers
  try {
    net::Profile p;
    p.node_name = options.name;
    p.cores = static_cast<uint32_t>(profile.cores);
    p.total_memory = profile.total_memory_bytes;
    p.free_memory = profile.free_memory_bytes;
    p.memory_bandwidth = profile.bandwidth_gbs;
    p.matmul_gflops = profile.matmul_gflops;
    p.details_json = nlohmann::json{{"threads", threads},
                                    {"unified_memory", profile.unified_memory},
                                    {"devices", devices_to_json(profile.devices)}}
                         .dump();
    net::send_message(*c, 0, p);
    auto idle_since = Clock::now();
    // A stage link failed: the coordinator is told which (it may be waiting on another
    // node of the chain), and the plan is dropped.
    // Told first, so that the coordinator hears of it before the ERRORs of the stages after
    // this one, whose links close next.
    const auto link_failed = [&](uint64_t id, const std::string& what) {
      log(what);
      net::send_message(*c, id, net::ErrorReply{net::ErrorCode::FORWARD_FAILED, what});
      close_links(*loaded);
      loaded.reset();
    };
    std::optional<net::Frame> pending;  // the coordinator's, read early
    while (!stopping) {
      std::optional<net::Frame> frame;
      bool from_prev = false;
      if (pending) {
        frame = std::move(pending);
        pending.reset();
      } else if (loaded && loaded->prev) {
        // Batches come from the previous stage; the coordinator only says LOAD or BYE.
        frame = c->try_recv_frame(net::Millis(0));
        if (!frame) {
          try {
            frame = loaded->prev->try_recv_frame(net::Millis(50));
          } catch (const std::exception& e) {
            // The previous stage closes its links when its coordinator says BYE (the end
            // of the session) or sends it a new plan (LOAD), which this node is then about
            // to hear too: no error then.
            std::optional<net::Frame> next = c->try_recv_frame(net::Millis(200));
            if (next && next->header.type == net::MessageType::BYE) {
              log("coordinator '" + c->peer_name() + "' said goodbye");
              close_links(*loaded);
              c->close();
              return;
            }
            if (!next || next->header.type != net::MessageType::LOAD) {
              link_failed(
                  0, std::string("[cluster] the link from the previous stage failed: ") + e.what());
            } else {
              close_links(*loaded);
              loaded.reset();
            }
            pending = std::move(next);  // read in turn
            continue;
          }
          from_prev = frame.has_value();
        }
      } else {
        frame = c->try_recv_frame(net::Millis(200));
      }
      if (!frame) {
        // Once loaded, the heartbeat watches the coordinator: an idle server (or a spare)
        // keeps its node however long no request comes.
        if (!loaded && Clock::now() - idle_since > options.recv_timeout) {
          throw Error("cluster",
                      "no request within " + std::to_string(options.recv_timeout.count()) + " ms");
        }
        continue;
      }
      idle_since = Clock::now();
      if (from_prev) {
        try {
          if (frame->header.type != net::MessageType::FORWARD) {
            throw StageLinkError("cluster",
                                 "the previous stage '" + loaded->prev->peer_name() + "' sent " +
                                     std::string(net::message_type_name(frame->header.type)));
          }
          forward(*c, *frame, *loaded, input, output, wire);
        } catch (const Error& e) {
          link_failed(frame->header.id, e.what());
        }
        continue;
      }
      switch (frame->header.type) {
        case net::MessageType::LOAD:
          if (loaded) close_links(*loaded);
          loaded.reset();  // a new plan replaces the old shard
          loaded = load(*c, net::decode_load(frame->payload()));
          break;
        case net::MessageType::FORWARD:
          if (!loaded || loaded->assignment.standby) {
            net::send_message(
                *c, frame->header.id,
                net::ErrorReply{net::ErrorCode::PROTOCOL,
                                loaded ? "FORWARD to a spare" : "FORWARD before LOAD"});
            break;
          }
          try {
            forward(*c, *frame, *loaded, input, output, wire);
          } catch (const StageLinkError& e) {
            link_failed(frame->header.id, e.what());
          }
          break;
        case net::MessageType::STATE:
          answer_state(*c, *frame, loaded);
          break;
        case net::MessageType::PROBE:
          // The coordinator measures the link (cluster/link_probe.h): answered at once.
          answer_probe(*c, *frame, probe_reply);
          break;
        case net::MessageType::PEER_PROBE: {
          // The coordinator asks for this node's link to another node.
          const net::PeerProbe ask = net::decode_peer_probe(frame->payload());
          net::send_message(*c, frame->header.id, measure_peer(ask));
          break;
        }
        case net::MessageType::BYE:
          log("coordinator '" + c->peer_name() + "' said goodbye");
          c->close();
          return;
        default:
          throw Error("cluster", "unexpected " +
                                     std::string(net::message_type_name(frame->header.type)) +
                                     " from the coordinator");
      }
    }
  } catch (const std::exception& e) {
    log("session with '" + c->peer_name() + "' ended: " + e.what());
    try {
      if (c->is_open()) {
        net::send_message(*c, 0, net::ErrorReply{net::ErrorCode::PROTOCOL, e.what()});
      }
    } catch (const std::exception&) {
    }
  }
  if (loaded) close_links(*loaded);
  c->close();
  // Ring links of this session that were never taken (a load that failed) go with it.
  std::lock_guard<std::mutex> lock(inbox_mutex);
  for (auto& [ring, link] : ring_inbox) link->close();
  ring_inbox.clear();
}

std::optional<Loaded> NodeServer::Impl::load(net::Connection& c, const net::Load& request) {
  try {
    Assignment a = assignment_from_json(nlohmann::json::parse(request.plan_json));
    const auto start = Clock::now();
    // Stage links to the next stage first, before this node loads anything: the next stage
    // finds them waiting when it has loaded its own shard. Closed if this load fails.
    std::vector<std::shared_ptr<net::Connection>> next;
    struct CloseOnFailure {
      std::vector<std::shared_ptr<net::Connection>>& links;
      ~CloseOnFailure() {
        for (auto& link : links) {
          if (link) link->close();
        }
      }
    } close_on_failure{next};
    if (a.rank == 0 && !a.standby) {
      for (const std::string& address : a.flow.next) {
        try {
          next.push_back(transport->connect(address, net::Millis(30000)));
          net::send_message(*next.back(), 0,
                            net::Ring{a.flow.token, static_cast<uint32_t>(a.stage)});
        } catch (const Error& e) {
          throw Error("cluster", "stage " + std::to_string(a.stage) +
                                     " could not link to the next stage at " + address + ": " +
                                     e.what());
        }
      }
    }
    // Where the weights come from: the same model (this node's copy, else the coordinator's
    // file), else a cached shard, else the wire.
    std::string source;
    fs::path path;
    bool whole_model = false;
    if (options.use_model_files) {
      if (auto local =
              find_local_model(request, options.own_store, options.cache_dir, options.log)) {
        path = local->path;
        source = local->source;
        whole_model = true;
      }
    }
    if (path.empty()) {
      path = shard_cache_path(options.cache_dir, request.model_hash, a);
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) {
        source = "the cache";
      } else {
        net::send_message(c, 0, net::Want{});
        const ShipStats got = receive_weights(c, a, path, net::Millis(60000));
        char rate[128];
        std::snprintf(rate, sizeof rate,
                      "received %.1f MB in %.3f s (%.2f GB/s; %.1f MB spliced straight in)",
                      got.bytes / 1e6, got.seconds, got.bytes / std::max(got.seconds, 1e-9) / 1e9,
                      got.placed_bytes / 1e6);
        log(std::string(rate) + " into " + path.string());
        source = "the coordinator";
      }
    }
    gguf::File file = gguf::File::open(path.string());
    ModelInfo info = read_model_info(file, /*partial=*/!whole_model);
    check_cache_size(a, info.hp);
    engine::ShardOptions so;
    so.n_ctx = a.n_ctx;
    so.n_seq = a.n_seq;
    so.isa = kernels::best_isa(kernels::detect_cpu(), options.isa_limit);
    so.n_threads = threads;
    std::string note;
    // Where the plan put the part (its GPU, all of it or split with the CPU, or its CPU),
    // else this node's --device; under --device auto a GPU that fails to take it (memory, a
    // weight type) leaves the CPU.
    so.device =
        engine::choose_device(a.device.value_or(options.device), *info.arch, info.hp, &note);
    std::unique_ptr<engine::Rank> rank =
        engine::open_rank(file, info, a.shard, so, placement(a, file, info, so.device),
                          options.device == "auto", &note);
    if (!note.empty()) log(note);
    if (rank->shard().device() != "cpu") log("layers on " + rank->describe(so.isa));
    std::unique_ptr<RingAllReduce> ring;
    if (a.n_ranks > 1 && !a.standby) {
      ring = join_ring(
          *transport, a,
          [&](uint32_t from, net::Millis timeout) {
            return accept_ring_link(a.ring.token, from, timeout);
          },
          net::Millis(30000));
      heartbeat->watch(ring->next());
      heartbeat->watch(ring->prev());
    }
    std::shared_ptr<net::Connection> prev;
    if (a.flow.prev > 0 && !a.standby) {
      // The previous stage's rank 0 dialled this rank (with the flow token, as its stage).
      try {
        prev =
            accept_ring_link(a.flow.token, static_cast<uint32_t>(a.stage - 1), net::Millis(30000));
      } catch (const Error& e) {
        throw Error("cluster", "stage " + std::to_string(a.stage - 1) +
                                   " did not link to this stage: " + e.what());
      }
      heartbeat->watch(prev);
    }
    for (auto& link : next) heartbeat->watch(link);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    log("loaded layers [" + std::to_string(a.shard.layer_begin) + ", " +
        std::to_string(a.shard.layer_end) + ")" + (a.shard.embedding ? " + embedding" : "") +
        (a.shard.output ? " + output" : "") + " from " + source + " in " +
        std::to_string(seconds).substr(0, 5) + " s" +
        (a.standby ? "; a spare for stage " + std::to_string(a.stage) + " rank " +
                         std::to_string(a.rank) + ", standing by"
                   : "") +
        (prev ? "; input from the previous stage" : "") +
        (a.flow.next.empty() ? ""
         : a.rank == 0       ? "; output to the next stage"
                             : "; output by rank 0"));
    net::send_message(c, 0, net::Ready{});
    Loaded result{std::move(a),    std::move(file), std::move(info), std::move(rank),
                  std::move(ring), std::move(prev), std::move(next), engine::RecurrentStates{}};
    next.clear();  // now the session's
    return result;
  } catch (const std::exception& e) {
    log(std::string("load failed: ") + e.what());
    net::send_message(c, 0, net::ErrorReply{net::ErrorCode::LOAD_FAILED, e.what()});
    return std::nullopt;
  }
}

// The plan's placement of the part on the node's GPU when it splits it; else, on a GPU, the
// one this node's --experts / --device-layers force (for tests, and users who know better than
// the planner), except for a tensor-parallel rank's slice, which runs on one device.
engine::DevicePlacement NodeServer::Impl::placement(const Assignment& a, const gguf::File& file,
                                                    const ModelInfo& info,
                                                    const engine::Device& device) {
  engine::DevicePlacement p;
  if (device.kind == engine::Device::kCpu) return p;
  if (a.device && a.placement != "device") return planned_placement(a);
  const engine::ExpertsChoice experts = engine::parse_experts_choice(options.experts);
  if (experts != engine::ExpertsChoice::kCpu && options.device_layers < 0) return p;
  if (a.n_ranks > 1) {
    log("--experts / --device-layers: a tensor-parallel rank runs on one device: all on " +
        engine::device_name(device));
    return p;
  }
  const engine::PartBytes part =
      engine::part_bytes(info, file, a.shard.layer_begin, a.shard.layer_end, a.shard.embedding,
                         a.shard.output, a.n_ctx, a.n_seq);
  p = engine::place_on_device(part, engine::device_memory_bytes(device), engine::kDeviceHeadroom,
                              experts, options.device_layers, engine::device_name(device));
  log(p.why);
  return p;
}

void NodeServer::Impl::forward(net::Connection& c, const net::Frame& frame, Loaded& loaded,
                               std::vector<float>& input, std::vector<float>& output,
                               std::vector<uint8_t>& wire) {
  net::Forward f = net::decode_forward(frame.payload());
  const HParams& hp = loaded.info.hp;
  const uint32_t n = static_cast<uint32_t>(f.batch.size());
  try {
    const float* in = nullptr;
    if (!loaded.assignment.shard.embedding) {
      if (f.activations.rows != n ||
          f.activations.cols != static_cast<uint32_t>(hp.hidden_width())) {
        throw Error("cluster", "FORWARD: activations are [" + std::to_string(f.activations.rows) +
                                   ", " + std::to_string(f.activations.cols) + "], expected [" +
                                   std::to_string(n) + ", " + std::to_string(hp.hidden_width()) +
                                   "]");
      }
      input.resize(static_cast<size_t>(n) * hp.hidden_width());
      net::decode_activations(f.activations, input);
      in = input.data();
    }
    const auto start = Clock::now();
    loaded.rank->forward(f.batch, in, output, loaded.ring.get());
    net::Result r;
    r.compute_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    const Assignment& a = loaded.assignment;
    if (!a.flow.next.empty()) {
      // The next stage runs on nodes: rank 0 sends it the hidden states (every rank holds
      // them after the last all-reduce) and the batch, with the stage times so far.
      if (a.rank != 0) return;
      if (f.upstream_ns.size() >= net::kMaxChainStages) {
        throw StageLinkError("cluster", "FORWARD: too many stage times");
      }
      net::Forward out;
      out.batch = std::move(f.batch);
      out.activations = net::encode_activations(
          std::span<const float>(output.data(), size_t{n} * static_cast<size_t>(hp.hidden_width())),
          n, static_cast<uint32_t>(hp.hidden_width()), a.wire_dtype, wire);
      out.upstream_ns = std::move(f.upstream_ns);
      out.upstream_ns.push_back(r.compute_ns);
      for (const auto& link : loaded.next) {
        try {
          net::send_message(*link, frame.header.id, out);
        } catch (const Error& e) {
          throw StageLinkError("cluster", "the link to the next stage '" + link->peer_name() +
                                              "' failed: " + e.what());
        }
      }
      return;
    }
    r.upstream_ns = std::move(f.upstream_ns);
    if (a.shard.output) {
      // This rank's vocabulary rows (all of them unless the head is split).
      const engine::Shard& head =
          loaded.rank->cpu_stage() != nullptr ? *loaded.rank->cpu_stage() : loaded.rank->shard();
      const engine::TensorSlice& slice = head.spec().slice;
      r.kind = net::ResultKind::LOGITS;
      const auto rows = static_cast<uint32_t>(f.batch.n_logits());
      r.output = net::encode_activations(output, rows,
                                         static_cast<uint32_t>(slice.vocab_end - slice.vocab_begin),
                                         net::WireDType::F32, wire);
    } else {
      // Every rank holds the full hidden state after the last all-reduce: rank 0 sends it.
      r.kind = net::ResultKind::HIDDEN;
      const uint32_t rows = a.rank == 0 ? n : 0;
      r.output = net::encode_activations(
          std::span<const float>(output.data(),
                                 size_t{rows} * static_cast<size_t>(hp.hidden_width())),
          rows, static_cast<uint32_t>(hp.hidden_width()), a.wire_dtype, wire);
    }
    net::send_message(c, frame.header.id, r);
  } catch (const StageLinkError&) {
    throw;
  } catch (const Error& e) {
    // A bad batch (full context, unknown slot) fails this request, not the session.
    net::send_message(c, frame.header.id,
                      net::ErrorReply{net::ErrorCode::FORWARD_FAILED, e.what()});
  }
}

// STATE: the operations in order, answered with their outcomes. One that cannot be done (a
// slot the part does not have, a return with nothing held) fails the request, not the session.
void NodeServer::Impl::answer_state(net::Connection& c, const net::Frame& frame,
                                    std::optional<Loaded>& loaded) {
  net::State request = net::decode_state(frame.payload());
  net::ErrorReply refused{net::ErrorCode::PROTOCOL, !loaded ? "STATE before LOAD" : ""};
  if (loaded && loaded->assignment.standby) refused.message = "STATE to a spare";
  try {
    for (net::StateOp& op : request.ops) {
      if (!refused.message.empty()) break;
      op.pos = run_state_op(loaded->states, *loaded->rank, op);
    }
  } catch (const Error& e) {
    refused = {net::ErrorCode::FORWARD_FAILED, e.what()};
  }
  if (!refused.message.empty()) return net::send_message(c, frame.header.id, refused);
  net::send_message(c, frame.header.id, request);
}

}  // namespace herd::cluster
