#include "cluster/cluster_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/assignment.h"
#include "cluster/peers.h"
#include "cluster/shipping.h"
#include "cluster/weight_cache.h"
#include "engine/shard.h"
#include "net/activations.h"
#include "net/tcp_transport.h"
#include "plan/local_profile.h"
#include "plan/plan_model.h"
#include "plan/planner.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace herd::cluster {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// How long a stage may take to answer one batch. A dead node is caught much sooner by the
// heartbeat; this only bounds a node that answers pings but never the batch.
constexpr net::Millis kResultTimeout{600000};
constexpr net::Millis kLoadTimeout{3600000};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A micro-batch on its way through the pipeline.
struct Job {
  size_t index = 0;
  engine::Batch batch;
  std::vector<float> data;  // [n][n_embd] input to the next stage; the last stage's logits
  bool failed = false;
};

// A queue between stages; pop() blocks until a job arrives or the queue closes.
class JobQueue {
 public:
  void push(Job job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    ready_.notify_one();
  }
  std::optional<Job> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (jobs_.empty()) return std::nullopt;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    return job;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> jobs_;
  bool closed_ = false;
};

// Micro-batches of a batch for a pipeline of n_stages: one piece when there is nothing to
// overlap; otherwise pieces small enough that every stage has work (a long prompt in
// chunks of at least 16 tokens, about 4 per stage; a few decode tokens in n_stages groups).
std::vector<engine::Batch> split_batch(const engine::Batch& batch, size_t n_stages) {
  const size_t n = static_cast<size_t>(batch.size());
  if (n_stages <= 1 || n <= 1) return {batch};
  const size_t piece = n >= 64 ? std::max<size_t>(16, (n + 4 * n_stages - 1) / (4 * n_stages))
                               : (n + n_stages - 1) / n_stages;
  std::vector<engine::Batch> pieces;
  for (size_t begin = 0; begin < n; begin += piece) {
    engine::Batch b;
    for (size_t t = begin; t < std::min(n, begin + piece); ++t) {
      b.add(batch.tokens[t], batch.seq[t], batch.pos[t], batch.want_logits[t] != 0);
    }
    pieces.push_back(std::move(b));
  }
  return pieces;
}

}  // namespace

// One stage of the pipeline: run here (shard) or on a node (connection).
struct StageRunner {
  int index = 0;
  std::string node_name;
  Assignment assignment;
  std::unique_ptr<engine::Shard> shard;     // when this process runs the stage
  std::shared_ptr<net::Connection> remote;  // else
  JobQueue in;
  std::thread worker;
  uint64_t next_frame_id = 0;
  std::vector<uint8_t> wire;   // f16 activations being sent
  std::vector<float> scratch;  // output of the local shard

  std::mutex stats_mutex;
  StageStats stats;
};

struct ClusterRunner::Impl {
  explicit Impl(gguf::File model) : file(std::move(model)), info(read_model_info(file)) {}

  ClusterOptions options;
  gguf::File file;
  ModelInfo info;
  Plan plan;
  std::vector<NodeProfile> nodes;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<net::TcpTransport> transport;
  std::unique_ptr<net::Heartbeat> heartbeat;
  std::vector<std::unique_ptr<StageRunner>> stages;

  // The forward() in progress.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Job> finished;
  size_t n_finished = 0;
  std::string error;  // the first failure; once set, the runner is broken
  double forward_seconds = 0;

  void run_stage(StageRunner& s, Job& job);
  void run_remote(StageRunner& s, Job& job);
  void worker(StageRunner& s);
  void finish(Job job);
  void fail(const std::string& message);
  void load_remote(StageRunner& s, const net::ContentHash& hash, const std::string& path);
  ~Impl();
};

ClusterRunner::Impl::~Impl() {
  for (auto& s : stages) s->in.close();
  for (auto& s : stages) {
    if (s->worker.joinable()) s->worker.join();
  }
  for (auto& s : stages) {
    if (s->remote) s->remote->close();
  }
  heartbeat.reset();
}

void ClusterRunner::Impl::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex);
  if (error.empty()) error = message;
}

void ClusterRunner::Impl::finish(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++n_finished;
    if (!job.failed) finished.push_back(std::move(job));
  }
  changed.notify_all();
}

void ClusterRunner::Impl::worker(StageRunner& s) {
  while (std::optional<Job> job = s.in.pop()) {
    bool broken;
    {
      std::lock_guard<std::mutex> lock(mutex);
      broken = !error.empty();
    }
    if (!broken && !job->failed) {
      try {
        run_stage(s, *job);
      } catch (const std::exception& e) {
        fail(e.what());
        job->failed = true;
      }
    } else {
      job->failed = true;
    }
    if (job->failed || static_cast<size_t>(s.index) + 1 == stages.size()) {
      finish(std::move(*job));
    } else {
      stages[static_cast<size_t>(s.index) + 1]->in.push(std::move(*job));
    }
  }
}

void ClusterRunner::Impl::run_stage(StageRunner& s, Job& job) {
  if (s.remote) return run_remote(s, job);
  const auto start = Clock::now();
  s.shard->forward(job.batch, job.data.empty() ? nullptr : job.data.data(), s.scratch, *pool);
  std::swap(job.data, s.scratch);
  const double seconds = seconds_since(start);
  std::lock_guard<std::mutex> lock(s.stats_mutex);
  s.stats.batches += 1;
  s.stats.tokens += job.batch.size();
  s.stats.compute_seconds += seconds;
  s.stats.busy_seconds += seconds;
}

void ClusterRunner::Impl::run_remote(StageRunner& s, Job& job) {
  const HParams& hp = info.hp;
  const auto n = static_cast<uint32_t>(job.batch.size());
  const auto start = Clock::now();
  const net::ConnectionStats before = s.remote->stats();

  net::Forward request;
  request.batch = std::move(job.batch);
  if (!s.assignment.shard.embedding) {
    request.activations = net::encode_activations(job.data, n, static_cast<uint32_t>(hp.n_embd),
                                                  options.wire_dtype, s.wire);
  }
  const uint64_t id = ++s.next_frame_id;
  net::send_message(*s.remote, id, request);
  job.batch = std::move(request.batch);

  net::Frame frame = s.remote->recv_frame(kResultTimeout);
  if (frame.header.type == net::MessageType::ERROR) {
    const net::ErrorReply e = net::decode_error(frame.payload());
    throw Error("cluster", "node '" + s.node_name + "': " + net::printable(e.message));
  }
  const net::Result result = net::expect_message<net::Result>(frame, s.remote->peer_name());
  const bool logits = s.assignment.shard.output;
  const auto rows = static_cast<uint32_t>(logits ? job.batch.n_logits() : job.batch.size());
  const auto cols = static_cast<uint32_t>(logits ? hp.n_vocab : hp.n_embd);
  if (frame.header.id != id ||
      result.kind != (logits ? net::ResultKind::LOGITS : net::ResultKind::HIDDEN) ||
      result.output.rows != rows || result.output.cols != cols) {
    throw Error("cluster", "node '" + s.node_name + "' answered batch " + std::to_string(id) +
                               " with " + std::to_string(result.output.rows) + "x" +
                               std::to_string(result.output.cols) + " for batch " +
                               std::to_string(frame.header.id) + ", expected " +
                               std::to_string(rows) + "x" + std::to_string(cols));
  }
  job.data.resize(static_cast<size_t>(rows) * cols);
  net::decode_activations(result.output, job.data);

  const net::ConnectionStats after = s.remote->stats();
  std::lock_guard<std::mutex> lock(s.stats_mutex);
  s.stats.batches += 1;
  s.stats.tokens += n;
  s.stats.compute_seconds += static_cast<double>(result.compute_ns) * 1e-9;
  s.stats.busy_seconds += seconds_since(start);
  s.stats.bytes_sent += after.bytes_sent - before.bytes_sent;
  s.stats.bytes_received += after.bytes_received - before.bytes_received;
}

void ClusterRunner::Impl::load_remote(StageRunner& s, const net::ContentHash& hash,
                                      const std::string& path) {
  net::Load load;
  load.plan_json = to_json(s.assignment).dump();
  load.model_hash = hash;
  load.model_path_hint = path;
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
          uint64_t total = 0;
          for (const TensorDesc& t : s.assignment.tensors) total += file.tensor(t.name).n_bytes;
          bar.emplace(options.progress, "shipping weights to '" + s.node_name + "'", total);
          progress = [&](uint64_t done, uint64_t) { bar->update(done); };
        }
        ship_weights(*s.remote, file, s.assignment, progress);
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

ClusterRunner::ClusterRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterRunner::~ClusterRunner() = default;

std::unique_ptr<ClusterRunner> ClusterRunner::open(const std::string& path,
                                                   const ClusterOptions& options) {
  auto impl = std::make_unique<Impl>(gguf::File::open(path));
  Impl& r = *impl;
  r.options = options;
  r.pool = std::make_unique<ThreadPool>(options.local.threads);

  net::TcpTransportOptions t;
  t.auth.node_name = options.name;
  t.auth.key = options.key;
  r.transport = std::make_unique<net::TcpTransport>(t);

  // Node 0 is this process; then the peers in the order given.
  LocalProfileOptions local;
  local.name = "local";
  local.bandwidth_gbs = options.local_bandwidth_gbs;
  r.nodes.push_back(measure_local_profile(*r.pool, local));
  std::vector<std::shared_ptr<net::Connection>> connections(1);
  for (Peer& peer : connect_peers(*r.transport, options.peers, options.connect_timeout)) {
    r.nodes.push_back(std::move(peer.profile));
    connections.push_back(std::move(peer.connection));
  }

  PlanOptions po = options.plan;
  po.n_ctx = options.local.n_ctx > 0 ? std::min(options.local.n_ctx, r.info.hp.n_ctx)
                                     : std::min(r.info.hp.n_ctx, engine::kDefaultMaxCtx);
  po.n_seq = options.local.n_seq;
  // Tensor-parallel ranks do not run across nodes yet: "auto" means a pipeline for now.
  if (po.mode == PlanOptions::Mode::kAuto) po.mode = PlanOptions::Mode::kPipeline;
  r.plan = herd::plan(plan_model_from(r.info, r.file), r.nodes, po);
  for (const Stage& stage : r.plan.stages) {
    if (stage.ranks.size() != 1) {
      throw Error("cluster",
                  "the plan puts " + std::to_string(stage.ranks.size()) +
                      " tensor-parallel ranks on one stage; across nodes herd runs pipeline "
                      "stages only so far (use --parallel pipeline)");
    }
  }

  // Nodes the plan does not use are let go at once.
  std::vector<bool> used(r.nodes.size(), false);
  for (const Stage& stage : r.plan.stages) used[static_cast<size_t>(stage.ranks[0].node)] = true;
  for (size_t i = 1; i < connections.size(); ++i) {
    if (!used[i]) connections[i]->close();
  }

  r.heartbeat = std::make_unique<net::Heartbeat>(options.heartbeat);
  const kernels::Isa isa = kernels::best_isa(kernels::detect_cpu(), options.local.isa_limit);
  for (size_t i = 0; i < r.plan.stages.size(); ++i) {
    auto s = std::make_unique<StageRunner>();
    const Stage& stage = r.plan.stages[i];
    const int node = stage.ranks[0].node;
    s->index = static_cast<int>(i);
    s->node_name = node == 0 ? "local" : r.nodes[static_cast<size_t>(node)].name;
    s->assignment = assignment_for(r.plan, static_cast<int>(i), r.file, r.info, options.wire_dtype);
    s->stats.node = s->node_name;
    s->stats.layer_begin = stage.layer_begin;
    s->stats.layer_end = stage.layer_end;
    if (node != 0) {
      s->remote = connections[static_cast<size_t>(node)];
      r.heartbeat->watch(s->remote);
    }
    r.stages.push_back(std::move(s));
  }

  // Remote stages load in parallel (each node reads or receives its own weights) while this
  // process loads its own stage.
  bool any_remote = false;
  for (auto& s : r.stages) any_remote = any_remote || s->remote != nullptr;
  net::ContentHash hash;
  if (any_remote) {
    fs::path cache;
    try {
      cache = default_cache_dir();
    } catch (const Error&) {
    }
    hash = file_content_hash(path, cache);
  }
  const std::string absolute = fs::absolute(path).string();
  std::vector<std::thread> loaders;
  std::vector<std::string> load_errors(r.stages.size());
  for (size_t i = 0; i < r.stages.size(); ++i) {
    if (!r.stages[i]->remote) continue;
    loaders.emplace_back([&, i] {
      try {
        r.load_remote(*r.stages[i], hash, absolute);
      } catch (const std::exception& e) {
        load_errors[i] = e.what();
      }
    });
  }
  for (auto& s : r.stages) {
    if (s->remote) continue;
    engine::ShardOptions so;
    so.n_ctx = r.plan.n_ctx;
    so.n_seq = r.plan.n_seq;
    so.isa = isa;
    try {
      s->shard = std::make_unique<engine::Shard>(
          engine::Shard::load(r.file, r.info, s->assignment.shard, so));
    } catch (const std::exception& e) {
      load_errors[static_cast<size_t>(s->index)] = e.what();
    }
  }
  for (auto& l : loaders) l.join();
  for (const std::string& e : load_errors) {
    if (!e.empty()) throw Error("cluster", e);
  }

  for (auto& s : r.stages) {
    StageRunner* stage = s.get();
    s->worker = std::thread([&r, stage] { r.worker(*stage); });
  }
  return std::unique_ptr<ClusterRunner>(new ClusterRunner(std::move(impl)));
}

void ClusterRunner::forward(const engine::Batch& batch, std::vector<float>& logits) {
  Impl& r = *impl_;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (!r.error.empty()) throw Error("cluster", "the cluster failed earlier: " + r.error);
    r.finished.clear();
    r.n_finished = 0;
  }
  const auto start = Clock::now();
  std::vector<engine::Batch> pieces = split_batch(batch, r.stages.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    Job job;
    job.index = i;
    job.batch = std::move(pieces[i]);
    r.stages[0]->in.push(std::move(job));
  }
  std::unique_lock<std::mutex> lock(r.mutex);
  r.changed.wait(lock, [&] { return r.n_finished == pieces.size(); });
  r.forward_seconds += seconds_since(start);
  if (!r.error.empty()) throw Error("cluster", r.error);
  std::sort(r.finished.begin(), r.finished.end(),
            [](const Job& a, const Job& b) { return a.index < b.index; });
  logits.clear();
  for (const Job& job : r.finished) logits.insert(logits.end(), job.data.begin(), job.data.end());
}

const HParams& ClusterRunner::hparams() const {
  return impl_->info.hp;
}
int64_t ClusterRunner::n_ctx() const {
  return impl_->plan.n_ctx;
}
int64_t ClusterRunner::n_seq() const {
  return impl_->plan.n_seq;
}
const gguf::File& ClusterRunner::file() const {
  return impl_->file;
}
const ModelInfo& ClusterRunner::info() const {
  return impl_->info;
}
const Plan& ClusterRunner::plan() const {
  return impl_->plan;
}
const std::vector<NodeProfile>& ClusterRunner::nodes() const {
  return impl_->nodes;
}

std::string ClusterRunner::describe() const {
  const Impl& r = *impl_;
  std::string text = r.plan.parallel + " of " + std::to_string(r.stages.size()) + " stages:";
  for (const auto& s : r.stages) {
    text += " " + s->node_name + " [" + std::to_string(s->assignment.shard.layer_begin) + ", " +
            std::to_string(s->assignment.shard.layer_end) + ")";
  }
  return text + "; local " + std::to_string(r.pool->size()) + " threads";
}

std::vector<StageStats> ClusterRunner::stage_stats() const {
  std::vector<StageStats> out;
  for (const auto& s : impl_->stages) {
    std::lock_guard<std::mutex> lock(s->stats_mutex);
    out.push_back(s->stats);
  }
  return out;
}

void ClusterRunner::reset_stats() {
  for (auto& s : impl_->stages) {
    std::lock_guard<std::mutex> lock(s->stats_mutex);
    StageStats fresh;
    fresh.node = s->stats.node;
    fresh.layer_begin = s->stats.layer_begin;
    fresh.layer_end = s->stats.layer_end;
    s->stats = fresh;
  }
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->forward_seconds = 0;
}

double ClusterRunner::forward_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->forward_seconds;
}

}  // namespace herd::cluster
