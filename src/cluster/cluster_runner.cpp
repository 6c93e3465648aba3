#include "cluster/cluster_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/assignment.h"
#include "cluster/peers.h"
#include "cluster/ring_links.h"
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
  // Between sending a batch to a stage (or chain of stages) and its result.
  Clock::time_point sent_at;
  uint64_t frame_id = 0;
  uint64_t bytes_sent = 0;
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
// A long prompt starts with a half-size chunk (so the next stage starts sooner) and so
// usually ends with one (so the previous stage idles less at the end): less bubble than
// equal chunks, at the same chunk efficiency in the middle.
std::vector<engine::Batch> split_batch(const engine::Batch& batch, size_t n_stages) {
  const size_t n = static_cast<size_t>(batch.size());
  if (n_stages <= 1 || n <= 1) return {batch};
  std::vector<size_t> sizes;
  if (n >= 64) {
    const size_t piece = std::max<size_t>(16, (n + 4 * n_stages - 1) / (4 * n_stages));
    sizes.push_back(piece / 2);
    for (size_t done = piece / 2; done < n; done += sizes.back()) {
      sizes.push_back(std::min(piece, n - done));
    }
  } else {
    const size_t piece = (n + n_stages - 1) / n_stages;
    for (size_t done = 0; done < n; done += sizes.back())
      sizes.push_back(std::min(piece, n - done));
  }
  std::vector<engine::Batch> pieces;
  size_t begin = 0;
  for (size_t size : sizes) {
    engine::Batch b;
    for (size_t t = begin; t < begin + size; ++t) {
      b.add(batch.tokens[t], batch.seq[t], batch.pos[t], batch.want_logits[t] != 0);
    }
    pieces.push_back(std::move(b));
    begin += size;
  }
  return pieces;
}

uint64_t random_token() {
  const net::Nonce nonce = net::random_nonce();
  uint64_t token;
  std::memcpy(&token, nonce.data(), sizeof token);
  return token;
}

}  // namespace

// One rank of a stage: run here (shard) or on a node (connection).
struct RankRunner {
  int node = 0;
  std::string node_name;
  Assignment assignment;
  std::unique_ptr<engine::Shard> shard;     // when this process runs the rank
  std::unique_ptr<RingAllReduce> ring;      // this process's tensor-parallel rank
  std::shared_ptr<net::Connection> remote;  // else
  uint64_t next_frame_id = 0;
  std::vector<float> output;  // [n][n_embd] hidden or [n_logits][its vocabulary rows]
  uint64_t compute_ns = 0;

  // The vocabulary rows this rank's logits cover.
  std::pair<int64_t, int64_t> vocab(int64_t n_vocab) const {
    const engine::TensorSlice& sl = assignment.shard.slice;
    if (assignment.n_ranks == 1) return {0, n_vocab};
    return {sl.vocab_begin, sl.vocab_end < 0 ? n_vocab : sl.vocab_end};
  }
};

// One stage of the pipeline: one rank, or several tensor-parallel ranks.
struct StageRunner {
  int index = 0;
  std::string name;  // node names of the ranks, for messages and stats
  std::vector<RankRunner> ranks;
  JobQueue in;
  std::thread worker;
  std::vector<uint8_t> wire;  // f16 activations being sent

  // Stage to stage (link_stages): consecutive stages whose ranks all run on nodes form a
  // chain; its first stage (the head) is sent the batch, its last (`chain_end`) answers.
  // A later stage of a chain (`chained`) is run by its head and does nothing itself.
  size_t chain_end = 0;
  bool chained = false;
  bool all_remote = false;
  uint64_t next_id = 0;           // frame id of the last batch sent (RESULT carries it)
  JobQueue sent;                  // all_remote head: batches sent, waiting for the result
  std::thread receiver;           // pops `sent`
  Clock::time_point last_result;  // when the previous result came (for busy_seconds)

  std::mutex stats_mutex;
  StageStats stats;
};

namespace {

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

// Bytes of the FORWARD frame a stage of a chain sends each rank of the next: header, batch
// layout, activations and the stage times so far (docs/protocol.md).
uint64_t link_frame_bytes(uint64_t n_tokens, int64_t n_embd, net::WireDType dtype,
                          uint64_t n_times) {
  return net::kFrameHeaderSize + 4 + 13 * n_tokens + 17 +
         n_tokens * static_cast<uint64_t>(n_embd) * net::wire_dtype_size(dtype) + 4 + 8 * n_times;
}

}  // namespace

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
  void send_batch(StageRunner& s, Job& job);
  void receive_result(StageRunner& s, Job& job);
  net::Frame receive_from_chain(StageRunner& s, RankRunner& rank);
  void pass_on(StageRunner& s, Job job);
  void worker(StageRunner& s);
  void receiver(StageRunner& s);
  void finish(Job job);
  void fail(const std::string& message);
  void load_remote(RankRunner& s, const net::ContentHash& hash, const std::string& path);
  ~Impl();
};

ClusterRunner::Impl::~Impl() {
  for (auto& s : stages) s->in.close();
  for (auto& s : stages) {
    if (s->worker.joinable()) s->worker.join();
  }
  for (auto& s : stages) s->sent.close();
  for (auto& s : stages) {
    if (s->receiver.joinable()) s->receiver.join();
  }
  for (auto& s : stages) {
    for (RankRunner& rank : s->ranks) {
      if (rank.remote) rank.remote->close();
      rank.ring.reset();
    }
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

void ClusterRunner::Impl::pass_on(StageRunner& s, Job job) {
  if (job.failed || s.chain_end + 1 == stages.size()) {
    finish(std::move(job));
  } else {
    stages[s.chain_end + 1]->in.push(std::move(job));
  }
}

// A stage this process runs (or holds a rank of) runs each batch to its end here; the head
// of a chain of nodes only sends it, and its receiver waits for the result, so that the
// next micro-batch goes out while the chain works on this one.
void ClusterRunner::Impl::worker(StageRunner& s) {
  while (std::optional<Job> job = s.in.pop()) {
    bool broken;
    {
      std::lock_guard<std::mutex> lock(mutex);
      broken = !error.empty();
    }
    if (!broken && !job->failed) {
      try {
        if (s.all_remote) {
          send_batch(s, *job);
        } else {
          run_stage(s, *job);
        }
      } catch (const std::exception& e) {
        fail(e.what());
        job->failed = true;
      }
    } else {
      job->failed = true;
    }
    if (s.all_remote) {
      s.sent.push(std::move(*job));
    } else {
      pass_on(s, std::move(*job));
    }
  }
}

void ClusterRunner::Impl::receiver(StageRunner& s) {
  while (std::optional<Job> job = s.sent.pop()) {
    bool broken;
    {
      std::lock_guard<std::mutex> lock(mutex);
      broken = !error.empty();
    }
    if (!broken && !job->failed) {
      try {
        receive_result(s, *job);
      } catch (const std::exception& e) {
        fail(e.what());
        job->failed = true;
      }
    } else {
      job->failed = true;
    }
    pass_on(s, std::move(*job));
  }
}

void ClusterRunner::Impl::run_stage(StageRunner& s, Job& job) {
  if (s.chained) return;  // its chain's head sent the batch on and received the result
  send_batch(s, job);
  receive_result(s, job);
}

// Every rank gets the batch (and the input activations) first; then this process runs its
// own rank, whose all-reduces meet the remote ranks' as they compute.
void ClusterRunner::Impl::send_batch(StageRunner& s, Job& job) {
  const HParams& hp = info.hp;
  const auto n = static_cast<uint32_t>(job.batch.size());
  const bool embeds = s.ranks[0].assignment.shard.embedding;
  const float* input = job.data.empty() ? nullptr : job.data.data();
  job.sent_at = Clock::now();
  job.frame_id = ++s.next_id;
  job.bytes_sent = 0;
  net::Forward request;
  request.batch = std::move(job.batch);
  if (!embeds) {
    request.activations = net::encode_activations(job.data, n, static_cast<uint32_t>(hp.n_embd),
                                                  options.wire_dtype, s.wire);
  }
  try {
    // Encoded once for every rank. The bytes counted are the frames' own (a connection's
    // counters also move with heartbeats, and with frames that arrive while we look).
    const net::Payload payload = net::encode(request);
    const net::ConstBytes parts[2] = {payload.head, payload.tail};  // no stage times
    for (RankRunner& rank : s.ranks) {
      if (!rank.remote) continue;
      rank.remote->send_frame_parts(
          net::FrameHeader{net::MessageType::FORWARD, 0, job.frame_id, payload.size()}, parts);
      job.bytes_sent += net::kFrameHeaderSize + payload.size();
    }
  } catch (...) {
    job.batch = std::move(request.batch);
    throw;
  }
  job.batch = std::move(request.batch);
  for (RankRunner& rank : s.ranks) {
    if (rank.remote) continue;
    const auto t0 = Clock::now();
    rank.shard->forward(job.batch, input, rank.output, *pool, rank.ring.get());
    rank.compute_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }
}

// The next frame from `rank` of the last stage of s's chain. While it waits, the other nodes
// of the chain are watched. When anything goes wrong in the chain (a connection failed: the
// heartbeat's verdict, or it closed; a node reported an ERROR: a bad batch, or a stage link
// that broke), the failure reported is the one of the earliest stage: a node that dies makes
// the next stage's link fail, which closes the links after it, so the later errors are
// consequences. A short grace lets the earlier reports arrive.
net::Frame ClusterRunner::Impl::receive_from_chain(StageRunner& s, RankRunner& rank) {
  if (s.chain_end == static_cast<size_t>(s.index)) return rank.remote->recv_frame(kResultTimeout);
  const auto deadline = Clock::now() + kResultTimeout;
  const auto first_failure = [&](const std::string& fallback) -> std::string {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (size_t i = static_cast<size_t>(s.index); i <= s.chain_end; ++i) {
      for (RankRunner& other : stages[i]->ranks) {
        try {
          // Throws "[net] peer 'name (address)': ..." for a failed connection.
          std::optional<net::Frame> frame = other.remote->try_recv_frame(net::Millis(0));
          // The last stage's ranks send results too: only an ERROR of theirs counts.
          if (!frame || (i == s.chain_end && frame->header.type != net::MessageType::ERROR)) {
            continue;
          }
          if (frame->header.type != net::MessageType::ERROR) {
            net::throw_unexpected(*frame, net::MessageType::ERROR, other.remote->peer_name());
          }
          const net::ErrorReply e = net::decode_error(frame->payload());
          return "[cluster] node '" + other.node_name + "': " + net::printable(e.message);
        } catch (const std::exception& e) {
          return e.what();
        }
      }
    }
    return fallback;
  };
  for (;;) {
    std::optional<net::Frame> frame;
    try {
      frame = rank.remote->try_recv_frame(net::Millis(100));
    } catch (const std::exception& e) {
      throw Error(first_failure(e.what()));
    }
    if (frame && frame->header.type != net::MessageType::ERROR) return std::move(*frame);
    if (frame) {
      const net::ErrorReply e = net::decode_error(frame->payload());
      throw Error(
          first_failure("[cluster] node '" + rank.node_name + "': " + net::printable(e.message)));
    }
    // The stages before the last send this process nothing but an ERROR.
    for (size_t i = static_cast<size_t>(s.index); i <= s.chain_end; ++i) {
      for (RankRunner& other : stages[i]->ranks) {
        if (&other == &rank) continue;
        std::optional<net::Frame> got;
        try {
          if (i == s.chain_end) {
            if (other.remote->is_open()) continue;
            throw Error("cluster", "node '" + other.node_name + "': its connection failed");
          }
          got = other.remote->try_recv_frame(net::Millis(0));
        } catch (const std::exception& e) {
          throw Error(first_failure(e.what()));
        }
        if (!got) continue;
        std::string text;
        try {
          if (got->header.type != net::MessageType::ERROR) {
            net::throw_unexpected(*got, net::MessageType::ERROR, other.remote->peer_name());
          }
          text = "[cluster] node '" + other.node_name +
                 "': " + net::printable(net::decode_error(got->payload()).message);
        } catch (const std::exception& e) {
          text = e.what();
        }
        throw Error(first_failure(text));
      }
    }
    if (Clock::now() > deadline) {
      throw Error("cluster", "node '" + rank.node_name + "': no result within " +
                                 std::to_string(kResultTimeout.count()) + " ms");
    }
  }
}

void ClusterRunner::Impl::receive_result(StageRunner& s, Job& job) {
  const HParams& hp = info.hp;
  const auto n = static_cast<uint32_t>(job.batch.size());
  StageRunner& end = *stages[s.chain_end];
  const bool logits = end.ranks[0].assignment.shard.output;
  const size_t chain = s.chain_end + 1 - static_cast<size_t>(s.index);
  uint64_t received = 0;
  std::vector<uint64_t> upstream_ns;  // the chain's stages before its last
  for (size_t i = 0; i < end.ranks.size(); ++i) {
    RankRunner& rank = end.ranks[i];
    if (!rank.remote) continue;
    net::Frame frame = receive_from_chain(s, rank);
    received += net::kFrameHeaderSize + frame.header.length;
    if (frame.header.type == net::MessageType::ERROR) {
      const net::ErrorReply e = net::decode_error(frame.payload());
      throw Error("cluster", "node '" + rank.node_name + "': " + net::printable(e.message));
    }
    const net::Result result = net::expect_message<net::Result>(frame, rank.remote->peer_name());
    const auto [vb, ve] = rank.vocab(hp.n_vocab);
    // Logits: this rank's vocabulary rows; hidden states: rank 0 sends them, others none.
    const auto rows = static_cast<uint32_t>(logits ? job.batch.n_logits() : i == 0 ? n : 0);
    const auto cols = static_cast<uint32_t>(logits ? ve - vb : hp.n_embd);
    if (frame.header.id != job.frame_id ||
        result.kind != (logits ? net::ResultKind::LOGITS : net::ResultKind::HIDDEN) ||
        result.output.rows != rows || result.output.cols != cols ||
        result.upstream_ns.size() != chain - 1) {
      throw Error("cluster", "node '" + rank.node_name + "' answered batch " +
                                 std::to_string(frame.header.id) + " with " +
                                 std::to_string(result.output.rows) + "x" +
                                 std::to_string(result.output.cols) + " (" +
                                 std::to_string(result.upstream_ns.size()) +
                                 " stage times), expected batch " + std::to_string(job.frame_id) +
                                 ", " + std::to_string(rows) + "x" + std::to_string(cols) + " (" +
                                 std::to_string(chain - 1) + ")");
    }
    rank.output.resize(static_cast<size_t>(rows) * cols);
    net::decode_activations(result.output, rank.output);
    rank.compute_ns = result.compute_ns;
    if (upstream_ns.empty()) upstream_ns = result.upstream_ns;
  }

  // The stage's output: rank 0's hidden states, or the ranks' logit columns side by side.
  uint64_t compute_ns = 0;
  for (const RankRunner& rank : end.ranks) compute_ns = std::max(compute_ns, rank.compute_ns);
  if (!logits || end.ranks.size() == 1) {
    std::swap(job.data, end.ranks[0].output);
  } else {
    const size_t n_logits = static_cast<size_t>(job.batch.n_logits());
    const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
    job.data.assign(n_logits * n_vocab, 0.0f);
    for (const RankRunner& rank : end.ranks) {
      const auto [vb, ve] = rank.vocab(hp.n_vocab);
      const size_t width = static_cast<size_t>(ve - vb);
      for (size_t t = 0; t < n_logits; ++t) {
        std::copy_n(rank.output.data() + t * width, width,
                    job.data.data() + t * n_vocab + static_cast<size_t>(vb));
      }
    }
  }

  // Per stage: its compute time; the coordinator's bytes at the ends of the chain; the time
  // the chain was busy with this batch (since it was sent, or since the previous result
  // came when batches queued) to its last stage, less the stages' compute before it.
  const auto now = Clock::now();
  const auto busy_from = std::max(job.sent_at, s.last_result);
  s.last_result = now;
  double busy = std::chrono::duration<double>(now - busy_from).count();
  for (size_t k = 0; k < chain; ++k) {
    StageRunner& stage = *stages[static_cast<size_t>(s.index) + k];
    const bool last = k + 1 == chain;
    const double seconds = static_cast<double>(last ? compute_ns : upstream_ns[k]) * 1e-9;
    std::lock_guard<std::mutex> lock(stage.stats_mutex);
    stage.stats.batches += 1;
    stage.stats.tokens += n;
    stage.stats.compute_seconds += seconds;
    stage.stats.busy_seconds += last ? std::max(seconds, busy) : seconds;
    busy -= seconds;
    if (k == 0) stage.stats.bytes_sent += job.bytes_sent;
    if (last) stage.stats.bytes_received += received;
    if (k > 0) {
      stage.stats.link_bytes_received +=
          stage.ranks.size() * link_frame_bytes(n, hp.n_embd, options.wire_dtype, k);
    }
  }
}

void ClusterRunner::Impl::load_remote(RankRunner& s, const net::ContentHash& hash,
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
  // A coordinator that holds no layers needs no speed (and no 256 MiB probe buffer).
  if (!options.plan.use_local && local.bandwidth_gbs <= 0) local.bandwidth_gbs = 1;
  // Nodes measure their matmul speed; so does a coordinator that may hold layers beside them.
  local.measure_matmul = local.bandwidth_gbs <= 0 && !options.peers.empty();
  r.nodes.push_back(measure_local_profile(*r.pool, local));
  for (size_t i = 0; i < options.peers.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (options.peers[i] == options.peers[j]) {
        throw Error("cluster", "peer " + options.peers[i] + " is given twice in --peers");
      }
    }
  }
  std::vector<std::shared_ptr<net::Connection>> connections(1);
  for (Peer& peer : connect_peers(*r.transport, options.peers, options.connect_timeout)) {
    r.nodes.push_back(std::move(peer.profile));
    connections.push_back(std::move(peer.connection));
  }

  PlanOptions po = options.plan;
  po.n_ctx = options.local.n_ctx > 0 ? std::min(options.local.n_ctx, r.info.hp.n_ctx)
                                     : std::min(r.info.hp.n_ctx, engine::kDefaultMaxCtx);
  po.n_seq = options.local.n_seq;
  r.plan = herd::plan(plan_model_from(r.info, r.file), r.nodes, po);
  // Nodes the plan does not use are let go at once.
  std::vector<bool> used(r.nodes.size(), false);
  for (const Stage& stage : r.plan.stages) {
    for (const Rank& rank : stage.ranks) used[static_cast<size_t>(rank.node)] = true;
  }
  for (size_t i = 1; i < connections.size(); ++i) {
    if (!used[i]) connections[i]->close();
  }

  r.heartbeat = std::make_unique<net::Heartbeat>(options.heartbeat);
  const kernels::Isa isa = kernels::best_isa(kernels::detect_cpu(), options.local.isa_limit);
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

  // Remote ranks load in parallel (each node reads or receives its own weights) while this
  // process loads its own and dials its ring links.
  bool any_remote = false;
  for (auto& s : r.stages) {
    for (RankRunner& rank : s->ranks) any_remote = any_remote || rank.remote != nullptr;
  }
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
  std::mutex errors_mutex;
  std::vector<std::string> load_errors;
  auto record = [&](const std::string& e) {
    std::lock_guard<std::mutex> lock(errors_mutex);
    load_errors.push_back(e);
  };
  for (auto& s : r.stages) {
    for (RankRunner& rank : s->ranks) {
      if (!rank.remote) continue;
      loaders.emplace_back([&r, &rank, &hash, &absolute, &record] {
        try {
          r.load_remote(rank, hash, absolute);
        } catch (const std::exception& e) {
          record(e.what());
          rank.remote->fail(e.what());  // ring neighbours waiting for it give up at once
        }
      });
    }
  }
  for (auto& s : r.stages) {
    for (RankRunner& rank : s->ranks) {
      if (rank.remote) continue;
      engine::ShardOptions so;
      so.n_ctx = r.plan.n_ctx;
      so.n_seq = r.plan.n_seq;
      so.isa = isa;
      so.n_threads = r.pool->size();
      try {
        rank.shard = std::make_unique<engine::Shard>(
            engine::Shard::load(r.file, r.info, rank.assignment.shard, so));
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
        record(e.what());
      }
    }
  }
  for (auto& l : loaders) l.join();
  // Each recorded error already names its module ("[cluster] node 'x' could not load ...",
  // "[engine] ..." of a local rank): passed on as it is, not prefixed a second time.
  if (!load_errors.empty()) throw Error(load_errors.front());

  for (auto& s : r.stages) {
    StageRunner* stage = s.get();
    if (stage->chained) continue;  // its head's threads run it
    s->worker = std::thread([&r, stage] { r.worker(*stage); });
    if (stage->all_remote) s->receiver = std::thread([&r, stage] { r.receiver(*stage); });
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
  if (pieces.size() == 1) {
    // Nothing to overlap (one decode token): the stages run on this thread, which saves a
    // hand-off between threads per stage (tens of microseconds each on a busy machine).
    Job job;
    job.batch = std::move(pieces[0]);
    try {
      for (const auto& stage : r.stages) r.run_stage(*stage, job);
    } catch (const std::exception& e) {
      r.fail(e.what());
      job.failed = true;
    }
    r.finish(std::move(job));
  } else {
    for (size_t i = 0; i < pieces.size(); ++i) {
      Job job;
      job.index = i;
      job.batch = std::move(pieces[i]);
      r.stages[0]->in.push(std::move(job));
    }
  }
  std::unique_lock<std::mutex> lock(r.mutex);
  r.changed.wait(lock, [&] { return r.n_finished == pieces.size(); });
  r.forward_seconds += seconds_since(start);
  if (!r.error.empty()) {
    // The first failure as its module reported it ("[cluster] node 'a': ..."): not wrapped
    // in a second "[cluster]".
    throw r.error.starts_with('[') ? Error(r.error) : Error("cluster", r.error);
  }
  std::sort(r.finished.begin(), r.finished.end(),
            [](const Job& a, const Job& b) { return a.index < b.index; });
  if (r.finished.size() == 1) {
    logits = std::move(r.finished[0].data);
    return;
  }
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
    text += " " + s->name + " [" + std::to_string(s->stats.layer_begin) + ", " +
            std::to_string(s->stats.layer_end) + ")";
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

nlohmann::json ClusterRunner::status() const {
  Impl& r = *impl_;
  nlohmann::json out;
  std::vector<bool> used(r.nodes.size(), false);
  for (const Stage& stage : r.plan.stages) {
    for (const Rank& rank : stage.ranks) used[static_cast<size_t>(rank.node)] = true;
  }
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    out["state"] = r.error.empty() ? "ok" : "degraded";
    out["reason"] = r.error;
    out["forward_seconds"] = r.forward_seconds;
  }
  out["parallel"] = r.plan.parallel;
  out["plan"] = to_json(r.plan);
  out["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    nlohmann::json n = to_json(r.nodes[i]);
    n["index"] = i;
    n["state"] = used[i] ? "up" : "unused";
    out["nodes"].push_back(std::move(n));
  }
  out["stages"] = nlohmann::json::array();
  for (const StageStats& s : stage_stats()) {
    out["stages"].push_back({{"index", out["stages"].size()},
                             {"node", s.node},
                             {"layers", {s.layer_begin, s.layer_end}},
                             {"batches", s.batches},
                             {"tokens", s.tokens},
                             {"compute_seconds", s.compute_seconds},
                             {"busy_seconds", s.busy_seconds},
                             {"bytes_sent", s.bytes_sent},
                             {"bytes_received", s.bytes_received},
                             {"link_bytes_received", s.link_bytes_received}});
  }
  out["events"] = nlohmann::json::array();
  return out;
}

double ClusterRunner::forward_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->forward_seconds;
}

}  // namespace herd::cluster
