#include "cluster/cluster_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "cluster/assignment.h"
#include "cluster/link_probe.h"
#include "cluster/peers.h"
#include "cluster/ring_links.h"
#include "cluster/shipping.h"
#include "cluster/weight_cache.h"
#include "engine/backend.h"
#include "engine/shard.h"
#include "net/activations.h"
#include "net/tcp_transport.h"
#include "plan/candidates.h"
#include "plan/local_profile.h"
#include "plan/plan_check.h"
#include "plan/plan_model.h"
#include "plan/planner.h"
#include "plan/rank_memory.h"
#include "plan/spares.h"
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
// Tokens per forward pass when a new pod replays the sequences (the plan's batch size).
constexpr size_t kReplayChunk = 256;
// How long a node may take to answer when a pod is formed again.
constexpr net::Millis kReformConnectTimeout{2000};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A micro-batch on its way through the pipeline.
struct Job {
  size_t index = 0;
  engine::Batch batch;
  std::vector<float> data;  // [n][hidden_width] input to the next stage; the last stage's logits
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

// A spare's place: the node (an index into the pod's nodes) and the rank it stands by for
// (plan/spares.h).
using Shadow = Spare;

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
  std::vector<float> output;                // [n][hidden_width] or [n_logits][its vocabulary rows]
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
         n_tokens * net::wire_row_bytes(static_cast<uint64_t>(n_embd), dtype) + 4 + 8 * n_times;
}

}  // namespace

// What outlives one pod: the model file (its tokenizer's views stay valid across
// re-plans), the options, this machine's profile (measured once), and every sequence's
// tokens, which rebuild the KV caches of a new pod.
struct ClusterRunner::State {
  State(const std::string& model_path, const ClusterOptions& o)
      : path(model_path),
        options(o),
        file(gguf::File::open(path)),
        info(read_model_info(file)),
        model(plan_model_from(info, file)) {}

  std::string path;
  ClusterOptions options;
  gguf::File file;
  ModelInfo info;
  PlanModel model;  // the planner's view of the file
  std::optional<NodeProfile> local_profile;
  std::optional<net::ContentHash> content_hash;
  std::map<std::string, NodeProfile> known;  // by address: every node a pod has had
  std::vector<std::string> returning;        // lost or new nodes that answer: taken in next request
  std::vector<std::string> discovered;       // "host:port" the mender's last browse found
  std::shared_ptr<net::Transport> probe_transport;  // the mender's
  std::vector<std::vector<int32_t>> history;        // [n_seq][position] tokens the pod has seen
  std::vector<Shadow> last_spares;           // of the last pod formed (node: index into its nodes)
  std::map<std::string, LinkProfile> links;  // by address: measured once, when first reached
  NodeLinks node_links;  // between nodes, by their addresses: measured once (link_probe.h)

  mutable std::mutex mutex;           // guards what status() reads below
  std::string state = "ok";           // "ok", "recovering" or "degraded"
  std::string reason;                 // why not "ok"
  std::vector<std::string> lost;      // addresses named or discovered that are not in the pod
  std::deque<nlohmann::json> events;  // newest last, at most kMaxEvents
  Clock::time_point last_attempt{};   // of forming a pod while degraded

  // How this runner's pods run, for predictions (and --parallel auto's choice).
  PredictCosts predict_costs() const {
    PredictCosts costs;
    costs.wire_bytes_per_value = net::wire_bytes_per_value(options.wire_dtype);
    costs.stage_links = options.stage_links;
    return costs;
  }

  void event(const std::string& kind, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    events.push_back({{"time", now}, {"kind", kind}, {"text", text}});
    while (events.size() > kMaxEvents) events.pop_front();
    if (options.progress) std::fprintf(options.progress, "herd: %s\n", text.c_str());
  }
  static constexpr size_t kMaxEvents = 100;
};

struct ClusterRunner::Impl {
  Impl(const gguf::File& model, const ModelInfo& model_info) : file(model), info(model_info) {}

  ClusterOptions options;
  const gguf::File& file;
  const ModelInfo& info;
  Plan plan;
  PlanOptions plan_options;  // the plan was made with
  std::vector<NodeProfile> nodes;
  Links links;  // to each of `nodes` ([0], this process, unused)
  std::unique_ptr<ThreadPool> pool;
  std::shared_ptr<net::Transport> transport;
  std::unique_ptr<net::Heartbeat> heartbeat;
  std::vector<std::unique_ptr<StageRunner>> stages;
  // Spares (--spare): nodes standing by, each with one remote rank's weights loaded
  // (assignment.standby; its stage and rank say which). Never sent a batch.
  std::vector<RankRunner> spares;

  // The forward() in progress.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Job> finished;
  size_t n_finished = 0;
  std::string error;  // the first failure; once set, the runner is broken
  double forward_seconds = 0;

  void forward(const engine::Batch& batch, std::vector<float>& logits);
  std::string describe() const;
  // "host:port" of the nodes whose connection (or a ring link to them) broke.
  std::vector<std::string> lost_nodes() const;
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
  for (RankRunner& spare : spares) spare.remote->close();
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
    request.activations = net::encode_activations(
        job.data, n, static_cast<uint32_t>(hp.hidden_width()), options.wire_dtype, s.wire);
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
    const auto cols = static_cast<uint32_t>(logits ? ve - vb : hp.hidden_width());
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
          stage.ranks.size() * link_frame_bytes(n, hp.hidden_width(), options.wire_dtype, k);
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

namespace {

// A pod formed again with spares in the places of lost nodes: the old plan with its node
// indices renumbered for the new peer list, and the spares that still stand by.
struct KeptPlan {
  Plan plan;
  std::vector<Shadow> spares;
};

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

// Forms a pod of this process and the nodes at `peers`: connects, plans, loads every
// shard. tolerant: a peer that cannot be reached (or stays busy) is left out and named in
// `unreachable`; otherwise it is an error. `kept`: the plan to run when every peer answers
// and can hold its part (spares taking lost nodes' places); else the planner decides.
// Throws herd::Error naming the node or the problem (a model that does not fit, a failed
// load).
std::unique_ptr<ClusterRunner::Impl> form_pod(ClusterRunner::State& st,
                                              const std::vector<std::string>& peers, bool tolerant,
                                              std::vector<std::string>& unreachable,
                                              std::vector<std::string>& failed_loads,
                                              const KeptPlan* kept = nullptr) {
  const ClusterOptions& options = st.options;
  const std::string& path = st.path;
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

  // Node 0 is this process; then the peers in the order given.
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
  std::vector<std::shared_ptr<net::Connection>> connections(1);
  std::vector<Peer> reached;
  if (tolerant) {
    for (const std::string& address : peers) {
      std::string why;
      // A node that lets the connection in but never answers (stopped, cut off) must not
      // hold a recovery up for long.
      const net::Millis timeout = std::min(options.connect_timeout, kReformConnectTimeout);
      if (std::optional<Peer> peer = try_connect_peer(*r.transport, address, timeout, why)) {
        reached.push_back(std::move(*peer));
      } else {
        unreachable.push_back(address + " (" + why + ")");
      }
    }
  } else {
    reached = connect_peers(*r.transport, peers, options.connect_timeout);
  }
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
  if (options.measure_links && r.nodes.size() > 2) {
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

  PlanOptions po = options.plan;
  po.n_ctx = options.local.n_ctx > 0 ? std::min(options.local.n_ctx, r.info.hp.n_ctx)
                                     : std::min(r.info.hp.n_ctx, engine::kDefaultMaxCtx);
  po.n_seq = options.local.n_seq;
  const PlanModel& model = st.model;
  std::vector<Shadow> shadows;
  bool planned = false;
  if (kept && reached.size() == peers.size()) {
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
  // Nodes the plan does not use, and are not spares, are let go at once.
  std::vector<bool> used(r.nodes.size(), false);
  for (const Stage& stage : r.plan.stages) {
    for (const Rank& rank : stage.ranks) used[static_cast<size_t>(rank.node)] = true;
  }
  for (const Shadow& shadow : shadows) used[static_cast<size_t>(shadow.node)] = true;
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

  // Remote ranks load in parallel (each node reads or receives its own weights) while this
  // process loads its own and dials its ring links.
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
    st.content_hash = file_content_hash(path, cache);
  }
  const net::ContentHash hash = st.content_hash.value_or(net::ContentHash{});
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
      loaders.emplace_back([&r, &rank, &hash, &absolute, &record, &errors_mutex, &failed_loads] {
        try {
          r.load_remote(rank, hash, absolute);
        } catch (const std::exception& e) {
          {
            std::lock_guard<std::mutex> lock(errors_mutex);
            failed_loads.push_back(r.nodes[static_cast<size_t>(rank.node)].address);
          }
          record(e.what());
          rank.remote->fail(e.what());  // ring neighbours waiting for it give up at once
        }
      });
    }
  }
  // A spare that cannot load is let go: the pod runs without it.
  std::vector<std::string> spare_errors(r.spares.size());
  for (size_t i = 0; i < r.spares.size(); ++i) {
    loaders.emplace_back([&r, &hash, &absolute, &spare_errors, i] {
      try {
        r.load_remote(r.spares[i], hash, absolute);
      } catch (const std::exception& e) {
        spare_errors[i] = e.what();
        r.spares[i].remote->fail(e.what());
      }
    });
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
            engine::load_shard(rank.assignment.device.value_or(r.options.local.device), r.file,
                               r.info, rank.assignment.shard, so, nullptr));
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
  for (size_t i = r.spares.size(); i-- > 0;) {
    if (spare_errors[i].empty()) continue;
    st.event("spares", "spare '" + r.spares[i].node_name + "' let go: " + spare_errors[i]);
    r.spares[i].remote->close();
    r.spares.erase(r.spares.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // Each recorded error already names its module ("[cluster] node 'x' could not load ...",
  // "[engine] ..." of a local rank): passed on as it is, not prefixed a second time.
  if (!load_errors.empty()) throw Error(load_errors.front());

  for (auto& s : r.stages) {
    StageRunner* stage = s.get();
    if (stage->chained) continue;  // its head's threads run it
    s->worker = std::thread([&r, stage] { r.worker(*stage); });
    if (stage->all_remote) s->receiver = std::thread([&r, stage] { r.receiver(*stage); });
  }
  return impl;
}

}  // namespace

std::unique_ptr<ClusterRunner> ClusterRunner::open(const std::string& path,
                                                   const ClusterOptions& options) {
  for (size_t i = 0; i < options.peers.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (options.peers[i] == options.peers[j]) {
        throw Error("cluster", "peer " + options.peers[i] + " is given twice in --peers");
      }
    }
  }
  auto state = std::make_unique<State>(path, options);
  std::vector<std::string> unreachable, failed_loads;
  std::unique_ptr<Impl> impl = form_pod(*state, options.peers, false, unreachable, failed_loads);
  state->history.resize(static_cast<size_t>(impl->plan.n_seq));
  state->event("formed", "pod formed: " + impl->describe());
  return std::unique_ptr<ClusterRunner>(new ClusterRunner(std::move(state), std::move(impl)));
}

void ClusterRunner::Impl::forward(const engine::Batch& batch, std::vector<float>& logits) {
  Impl& r = *this;
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

std::vector<std::string> ClusterRunner::Impl::lost_nodes() const {
  std::vector<std::string> lost;
  auto add = [&](int node) {
    const std::string& address = nodes[static_cast<size_t>(node)].address;
    if (std::find(lost.begin(), lost.end(), address) == lost.end()) lost.push_back(address);
  };
  for (const auto& s : stages) {
    for (const RankRunner& rank : s->ranks) {
      if (rank.remote && !rank.remote->is_open()) add(rank.node);
    }
  }
  return lost;
}

std::string ClusterRunner::Impl::describe() const {
  const Impl& r = *this;
  std::string text = r.plan.parallel + " of " + std::to_string(r.stages.size()) + " stages:";
  for (const auto& s : r.stages) {
    text += " " + s->name + " [" + std::to_string(s->stats.layer_begin) + ", " +
            std::to_string(s->stats.layer_end) + ")";
  }
  for (size_t i = 0; i < r.spares.size(); ++i) {
    text += (i == 0 ? "; spares: " : ", ") + r.spares[i].node_name + " for stage " +
            std::to_string(r.spares[i].assignment.stage);
    if (r.spares[i].assignment.n_ranks > 1) {
      text += " rank " + std::to_string(r.spares[i].assignment.rank);
    }
  }
  return text + "; local " + std::to_string(r.pool->size()) + " threads";
}

// ---- the runner: one pod at a time, formed again when a node is lost ----

namespace {

constexpr net::Millis kRetryEvery{1000};  // forming a pod while degraded; probing lost nodes
constexpr int kMaxRecoveries = 4;         // pods formed again for one batch before giving up

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

// Spares in the places of lost nodes: when every lost node that ran a rank has a spare
// standing by for that rank, the pod is formed again with the same plan (every survivor
// and spare loads what it already has: no weights shipped). Gives the peers to ask (the
// plan's nodes in order with spares in place, then the spares still standing by) and the
// plan renumbered for them; nullopt when a lost rank has no live spare.
std::optional<KeptPlan> spares_in_place(const Plan& plan, const std::vector<NodeProfile>& nodes,
                                        const std::vector<Shadow>& spares,
                                        const std::vector<std::string>& lost,
                                        std::vector<std::string>& peers, std::string& text) {
  const auto is_lost = [&](int node) {
    return std::find(lost.begin(), lost.end(), nodes[static_cast<size_t>(node)].address) !=
           lost.end();
  };
  std::vector<bool> taken(spares.size(), false);
  std::vector<int> renumbered(nodes.size(), -1);
  renumbered[0] = 0;
  KeptPlan kept{plan, {}};
  peers.clear();
  text.clear();
  for (size_t i = 0; i < kept.plan.stages.size(); ++i) {
    for (size_t k = 0; k < kept.plan.stages[i].ranks.size(); ++k) {
      int& node = kept.plan.stages[i].ranks[k].node;
      if (node == 0) continue;
      int now = node;
      if (is_lost(node)) {
        now = -1;
        for (size_t j = 0; j < spares.size() && now < 0; ++j) {
          const Shadow& sp = spares[j];
          if (!taken[j] && sp.stage == static_cast<int>(i) && sp.rank == static_cast<int>(k) &&
              !is_lost(sp.node)) {
            taken[j] = true;
            now = sp.node;
            text += (text.empty() ? "spare '" : ", spare '") +
                    nodes[static_cast<size_t>(now)].name + "' in the place of '" +
                    nodes[static_cast<size_t>(node)].name + "'";
          }
        }
        if (now < 0) return std::nullopt;
      }
      if (renumbered[static_cast<size_t>(now)] < 0) {
        peers.push_back(nodes[static_cast<size_t>(now)].address);
        renumbered[static_cast<size_t>(now)] = static_cast<int>(peers.size());
      }
      node = renumbered[static_cast<size_t>(now)];
    }
  }
  if (text.empty()) return std::nullopt;  // no rank was lost: nothing to put in place
  for (size_t j = 0; j < spares.size(); ++j) {
    if (taken[j] || is_lost(spares[j].node)) continue;
    peers.push_back(nodes[static_cast<size_t>(spares[j].node)].address);
    kept.spares.push_back({static_cast<int>(peers.size()), spares[j].stage, spares[j].rank});
  }
  return kept;
}

// Whether the batch begins a request (a prompt, or a sequence started again or rewound)
// rather than only continuing sequences by a token each: the boundary where nodes may
// join the pod.
bool begins_request(const engine::Batch& batch, const std::vector<std::vector<int32_t>>& history) {
  std::vector<int32_t> seen;
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int32_t seq = batch.seq[static_cast<size_t>(i)];
    const auto pos = static_cast<size_t>(batch.pos[static_cast<size_t>(i)]);
    const auto s = static_cast<size_t>(seq);
    if (pos == 0 || s >= history.size() || pos < history[s].size()) return true;
    if (std::find(seen.begin(), seen.end(), seq) != seen.end()) return true;  // a chunk
    seen.push_back(seq);
  }
  return false;
}

}  // namespace

ClusterRunner::ClusterRunner(std::unique_ptr<State> state, std::shared_ptr<Impl> pod)
    : state_(std::move(state)), pod_(std::move(pod)) {
  n_ctx_ = pod_->plan.n_ctx;
  n_seq_ = pod_->plan.n_seq;
  remember_pod(*pod_);
  mender_ = std::thread([this] { mend(); });
}

ClusterRunner::~ClusterRunner() {
  {
    std::lock_guard<std::mutex> lock(mender_mutex_);
    stopping_ = true;
  }
  mender_wake_.notify_all();
  mender_.join();
}

void ClusterRunner::mend() {
  std::unique_lock<std::mutex> lock(mender_mutex_);
  while (!mender_wake_.wait_for(lock, kRetryEvery, [&] { return stopping_; })) {
    lock.unlock();
    if (state_->options.discover) {
      // Browsing takes a while (--discover-ms): done here, never on a recovery's path.
      std::vector<std::string> found = state_->options.discover();
      std::lock_guard<std::mutex> guard(state_->mutex);
      state_->discovered = std::move(found);
    }
    if (unavailable().empty()) {
      probe_returning();
      lock.lock();
      continue;
    }
    {
      std::lock_guard<std::mutex> turn(forward_mutex_);
      if (!pod() && !unavailable().empty()) {
        try {
          const auto start = Clock::now();
          std::shared_ptr<Impl> formed = form_again(engine::Batch{});
          set_pod(formed);
          state_->event("formed",
                        "pod whole again after " +
                            std::to_string(static_cast<int>(seconds_since(start) * 1000)) +
                            " ms, replayed " + std::to_string(replayed_tokens_) +
                            " tokens: " + formed->describe());
        } catch (const std::exception&) {
          // Still degraded; form_again recorded why.
        }
      }
    }
    lock.lock();
  }
}

std::shared_ptr<ClusterRunner::Impl> ClusterRunner::pod() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return pod_;
}

void ClusterRunner::set_pod(std::shared_ptr<Impl> pod) {
  std::shared_ptr<Impl> old;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    old = std::move(pod_);
    pod_ = std::move(pod);
  }
  // The old pod says BYE to its nodes here, outside the lock (status() is not kept waiting).
}

void ClusterRunner::remember_pod(const Impl& pod) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (size_t i = 1; i < pod.nodes.size(); ++i) state_->known[pod.nodes[i].address] = pod.nodes[i];
  last_plan_ = pod.plan;
  last_nodes_ = pod.nodes;
  state_->last_spares.clear();
  for (const RankRunner& spare : pod.spares) {
    state_->last_spares.push_back({spare.node, spare.assignment.stage, spare.assignment.rank});
  }
}

std::vector<std::string> ClusterRunner::all_peers() const {
  std::vector<std::string> peers = state_->options.peers;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const std::string& address : state_->discovered) {
    if (std::find(peers.begin(), peers.end(), address) == peers.end()) peers.push_back(address);
  }
  return peers;
}

void ClusterRunner::replay(Impl& pod, const engine::Batch& next) {
  State& st = *state_;
  std::vector<float> scratch;
  int64_t replayed = 0;
  const auto start = Clock::now();
  for (size_t seq = 0; seq < st.history.size(); ++seq) {
    const std::vector<int32_t>& tokens = st.history[seq];
    size_t keep = tokens.size();  // up to where `next` continues (or rewinds) the sequence
    for (int64_t i = 0; i < next.size(); ++i) {
      if (static_cast<size_t>(next.seq[static_cast<size_t>(i)]) == seq) {
        keep = std::min(keep, static_cast<size_t>(next.pos[static_cast<size_t>(i)]));
      }
    }
    for (size_t begin = 0; begin < keep;) {
      const size_t end = std::min(keep, begin + kReplayChunk);
      engine::Batch chunk;
      for (size_t p = begin; p < end; ++p) {
        chunk.add(tokens[p], static_cast<int32_t>(seq), static_cast<int32_t>(p), p + 1 == end);
      }
      pod.forward(chunk, scratch);
      replayed += static_cast<int64_t>(end - begin);
      begin = end;
    }
  }
  replayed_tokens_ = replayed;
  replay_ms_ = static_cast<int>(seconds_since(start) * 1000);
}

std::shared_ptr<ClusterRunner::Impl> ClusterRunner::form_again(const engine::Batch& next,
                                                               std::vector<std::string> skip) {
  State& st = *state_;
  // First, spares in the lost nodes' places (the same plan: nothing to ship); if that
  // fails, the planner on every node that answers.
  std::optional<KeptPlan> kept;
  std::vector<std::string> kept_peers;
  std::string in_place;
  if (!skip.empty()) {
    std::lock_guard<std::mutex> lock(st.mutex);
    kept = spares_in_place(last_plan_, last_nodes_, st.last_spares, skip, kept_peers, in_place);
  }
  // Each round leaves out the nodes that failed in the one before (could not load, or died
  // during the replay): at most one round per node.
  for (;;) {
    std::vector<std::string> unreachable, peers, failed;
    for (const std::string& address : all_peers()) {
      if (std::find(skip.begin(), skip.end(), address) == skip.end()) {
        peers.push_back(address);
      } else {
        unreachable.push_back(address + " (lost)");
      }
    }
    std::optional<KeptPlan> spares;
    spares.swap(kept);  // once: a later round plans again
    if (spares) peers = kept_peers;
    std::shared_ptr<Impl> pod;
    std::string error;
    try {
      pod = form_pod(st, peers, true, unreachable, failed, spares ? &*spares : nullptr);
      if (spares && pod->plan == spares->plan) st.event("spares", in_place);
      try {
        replay(*pod, next);
      } catch (const std::exception& e) {
        error = e.what();
        failed = settled_lost_nodes(*pod);
        if (failed.empty()) throw;
        pod.reset();
      }
    } catch (const std::exception& e) {
      error = e.what();
      if (spares && failed.empty()) {
        st.event("spares",
                 "the spares could not take the lost nodes' places: " + error + "; planning again");
        continue;
      }
      if (failed.empty()) {
        std::string reason = error;
        if (!unreachable.empty()) {
          std::vector<std::string> named;
          for (const std::string& u : unreachable) {
            const auto known = st.known.find(u.substr(0, u.find(' ')));
            named.push_back(known == st.known.end() ? u : "'" + known->second.name + "' " + u);
          }
          reason += "; not answering: " + joined(named);
        }
        bool news;
        {
          std::lock_guard<std::mutex> lock(st.mutex);
          news = st.state != "degraded" || st.reason != reason;
          st.state = "degraded";
          st.reason = reason;
          st.last_attempt = Clock::now();
        }
        if (news) st.event("degraded", "the pod cannot run the model: " + reason);
        throw Error("cluster", "the pod cannot run the model: " + reason);
      }
      pod.reset();
    }
    if (!pod) {
      st.event("lost", "lost node " + named_nodes(failed) + " while forming the pod: " + error);
      skip.insert(skip.end(), failed.begin(), failed.end());
      continue;
    }
    remember_pod(*pod);
    std::lock_guard<std::mutex> lock(st.mutex);
    st.lost.clear();
    for (const std::string& u : unreachable) st.lost.push_back(u.substr(0, u.find(' ')));
    st.returning.clear();  // this pod asked every node that answers
    st.state = "ok";
    st.reason.clear();
    return pod;
  }
}

std::vector<std::string> ClusterRunner::settled_lost_nodes(const Impl& pod) const {
  // A node that reports its ring or stage neighbour gone may answer before this process
  // sees the neighbour's connection break: the heartbeat settles it within its timeout.
  std::vector<std::string> lost = pod.lost_nodes();
  const auto settle =
      Clock::now() + state_->options.heartbeat.timeout + state_->options.heartbeat.interval;
  while (lost.empty() && Clock::now() < settle) {
    std::this_thread::sleep_for(net::Millis(20));
    lost = pod.lost_nodes();
  }
  return lost;
}

std::string ClusterRunner::named_nodes(const std::vector<std::string>& addresses) const {
  std::string names;
  for (const std::string& address : addresses) {
    const auto known = state_->known.find(address);
    names += (names.empty() ? "'" : ", '") +
             (known == state_->known.end() ? address : known->second.name) + "' (" + address + ")";
  }
  return names;
}

void ClusterRunner::forward(const engine::Batch& batch, std::vector<float>& logits) {
  std::lock_guard<std::mutex> turn(forward_mutex_);
  State& st = *state_;
  if (pod() && begins_request(batch, st.history)) take_in_returning(batch);
  std::string last_error;
  std::vector<std::string> lost;  // by the last attempt: not asked again while recovering
  for (int attempt = 0; attempt <= kMaxRecoveries; ++attempt) {
    std::shared_ptr<Impl> current = pod();
    if (!current) {
      {
        std::lock_guard<std::mutex> lock(st.mutex);
        if (st.state == "degraded" && Clock::now() - st.last_attempt < kRetryEvery) {
          throw Error("cluster", "the pod cannot run the model: " + st.reason);
        }
      }
      const auto start = Clock::now();
      current = form_again(batch, lost);
      set_pod(current);
      st.event("formed", "pod formed again in " +
                             std::to_string(static_cast<int>(seconds_since(start) * 1000)) +
                             " ms after replaying " + std::to_string(replayed_tokens_) +
                             " tokens (in " + std::to_string(replay_ms_) +
                             " ms): " + current->describe());
    }
    try {
      current->forward(batch, logits);
      for (int64_t i = 0; i < batch.size(); ++i) {
        const auto seq = static_cast<size_t>(batch.seq[static_cast<size_t>(i)]);
        const auto pos = static_cast<size_t>(batch.pos[static_cast<size_t>(i)]);
        if (seq >= st.history.size()) continue;
        std::vector<int32_t>& h = st.history[seq];
        // A write before the end rewinds the sequence, as it does in the KV cache; a gap
        // (never made by generation or the scheduler) leaves the sequence unknown.
        if (pos > h.size()) {
          h.clear();
          continue;
        }
        h.resize(pos);
        h.push_back(batch.tokens[static_cast<size_t>(i)]);
      }
      return;
    } catch (const std::exception& e) {
      last_error = e.what();
      // A node that reports its ring neighbour gone may answer before this process sees
      // the neighbour's connection break: the heartbeat settles it within its timeout.
      lost = settled_lost_nodes(*current);
      set_pod(nullptr);  // broken either way: the next batch gets a pod formed again
      if (lost.empty()) throw;
      {
        std::lock_guard<std::mutex> lock(st.mutex);
        st.state = "recovering";
        st.reason = "lost " + joined(lost);
        st.lost = lost;
      }
      st.event("lost", "lost node " + named_nodes(lost) + ": " + last_error);
    }
  }
  throw Error("cluster", "gave up after " + std::to_string(kMaxRecoveries + 1) +
                             " pods failed in a row; last: " + last_error);
}

void ClusterRunner::probe_returning() {
  State& st = *state_;
  std::vector<std::string> candidates;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    candidates = st.lost;
  }
  const std::vector<std::string> peers = all_peers();
  {
    const std::shared_ptr<Impl> current = pod();
    if (!current) return;
    // A spare that died is lost like any node: probed, and taken in again when it answers.
    for (const RankRunner& spare : current->spares) {
      const std::string& address = current->nodes[static_cast<size_t>(spare.node)].address;
      if (spare.remote->is_open() ||
          std::find(candidates.begin(), candidates.end(), address) != candidates.end()) {
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(st.mutex);
        st.lost.push_back(address);
      }
      candidates.push_back(address);
      st.event("lost", "lost spare '" + spare.node_name + "' (" + address + ")");
    }
    // Nodes the plan left out as unneeded are among current->nodes too: not asked.
    for (const std::string& address : peers) {
      bool in_pod = false;
      for (const NodeProfile& n : current->nodes) in_pod = in_pod || n.address == address;
      if (!in_pod && std::find(candidates.begin(), candidates.end(), address) == candidates.end()) {
        candidates.push_back(address);
      }
    }
  }
  if (candidates.empty()) return;
  if (!st.probe_transport) st.probe_transport = st.options.transport;
  if (!st.probe_transport) {
    st.probe_transport = std::make_shared<net::TcpTransport>(tcp_options(st.options));
  }
  std::vector<std::string> back;
  for (const std::string& address : candidates) {
    std::string why;
    if (std::optional<Peer> peer =
            try_connect_peer(*st.probe_transport, address, net::Millis(500), why)) {
      peer->connection->close();
      back.push_back(address);
    }
  }
  std::lock_guard<std::mutex> lock(st.mutex);
  st.returning = back;
}

void ClusterRunner::take_in_returning(const engine::Batch& batch) {
  State& st = *state_;
  std::vector<std::string> back;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    back.swap(st.returning);
  }
  if (back.empty()) return;
  const auto start = Clock::now();
  set_pod(nullptr);  // its nodes end their sessions now, ready for the new pod
  std::shared_ptr<Impl> formed = form_again(batch);
  set_pod(formed);
  st.event("joined", "node " + joined(back) + " joined; pod formed again in " +
                         std::to_string(static_cast<int>(seconds_since(start) * 1000)) +
                         " ms: " + formed->describe());
}

const HParams& ClusterRunner::hparams() const {
  return state_->info.hp;
}
int64_t ClusterRunner::n_ctx() const {
  return n_ctx_;
}
int64_t ClusterRunner::n_seq() const {
  return n_seq_;
}
const gguf::File& ClusterRunner::file() const {
  return state_->file;
}
const ModelInfo& ClusterRunner::info() const {
  return state_->info;
}
const Plan& ClusterRunner::plan() const {
  return last_plan_;
}
const std::vector<NodeProfile>& ClusterRunner::nodes() const {
  return last_nodes_;
}
std::string ClusterRunner::describe() const {
  const std::shared_ptr<Impl> current = pod();
  if (current) return current->describe();
  std::lock_guard<std::mutex> lock(state_->mutex);
  return "no pod: " + state_->reason;
}

std::vector<StageStats> ClusterRunner::stage_stats() const {
  std::vector<StageStats> out;
  const std::shared_ptr<Impl> current = pod();
  if (!current) return out;
  for (const auto& s : current->stages) {
    std::lock_guard<std::mutex> lock(s->stats_mutex);
    out.push_back(s->stats);
  }
  return out;
}

void ClusterRunner::reset_stats() {
  const std::shared_ptr<Impl> current = pod();
  if (!current) return;
  for (auto& s : current->stages) {
    std::lock_guard<std::mutex> lock(s->stats_mutex);
    StageStats fresh;
    fresh.node = s->stats.node;
    fresh.layer_begin = s->stats.layer_begin;
    fresh.layer_end = s->stats.layer_end;
    s->stats = fresh;
  }
  std::lock_guard<std::mutex> lock(current->mutex);
  current->forward_seconds = 0;
}

Prediction ClusterRunner::prediction(int64_t prompt_tokens) const {
  const std::shared_ptr<Impl> current = pod();
  if (!current) return {};
  PredictCosts costs = state_->predict_costs();
  costs.prompt_tokens = std::max<int64_t>(1, prompt_tokens);
  return predict(current->plan, state_->model, current->nodes, current->links,
                 current->plan_options, costs);
}

double ClusterRunner::forward_seconds() const {
  const std::shared_ptr<Impl> current = pod();
  if (!current) return 0;
  std::lock_guard<std::mutex> lock(current->mutex);
  return current->forward_seconds;
}

std::string ClusterRunner::unavailable() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->state == "degraded" ? state_->reason : std::string();
}

nlohmann::json ClusterRunner::status() const {
  const State& st = *state_;
  const std::shared_ptr<Impl> current = pod();
  nlohmann::json out;
  std::vector<std::string> lost;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    out["state"] = st.state;
    out["reason"] = st.reason;
    out["events"] = nlohmann::json::array();
    for (const nlohmann::json& e : st.events) out["events"].push_back(e);
    lost = st.lost;
  }
  out["nodes"] = nlohmann::json::array();
  out["stages"] = nlohmann::json::array();
  out["forward_seconds"] = forward_seconds();
  if (current) {
    out["parallel"] = current->plan.parallel;
    out["plan"] = to_json(current->plan);
    const Prediction predicted = prediction();
    out["prediction"] = {{"decode_tokens_per_s", predicted.decode_tokens_per_s},
                         {"prefill_tokens_per_s", predicted.prefill_tokens_per_s}};
    std::vector<bool> used(current->nodes.size(), false);
    for (const Stage& stage : current->plan.stages) {
      for (const Rank& rank : stage.ranks) used[static_cast<size_t>(rank.node)] = true;
    }
    for (size_t i = 0; i < current->nodes.size(); ++i) {
      nlohmann::json n = to_json(current->nodes[i]);
      n["index"] = i;
      n["state"] = used[i] ? "up" : "unused";
      if (i > 0) {
        const LinkProfile& l = current->links.to_node[i];
        n["link"] = {{"rtt_ms", l.rtt_seconds * 1e3},
                     {"send_gbits", l.send_bytes_per_s * 8e-9},
                     {"receive_gbits", l.receive_bytes_per_s * 8e-9},
                     {"measured", l.measured}};
      }
      for (const RankRunner& spare : current->spares) {
        if (spare.node != static_cast<int>(i)) continue;
        const int stage = spare.assignment.stage, rank = spare.assignment.rank;
        const int node =
            current->plan.stages[static_cast<size_t>(stage)].ranks[static_cast<size_t>(rank)].node;
        n["state"] = spare.remote->is_open() ? "spare" : "lost";
        n["stands_by"] = {{"stage", stage},
                          {"rank", rank},
                          {"node", current->nodes[static_cast<size_t>(node)].name}};
      }
      out["nodes"].push_back(std::move(n));
    }
    // Links measured between nodes (stage links and rings run on them).
    out["node_links"] = nlohmann::json::array();
    for (const auto& [pair, l] : current->links.between) {
      out["node_links"].push_back({{"from", current->nodes[static_cast<size_t>(pair.first)].name},
                                   {"to", current->nodes[static_cast<size_t>(pair.second)].name},
                                   {"rtt_ms", l.rtt_seconds * 1e3},
                                   {"send_gbits", l.send_bytes_per_s * 8e-9},
                                   {"receive_gbits", l.receive_bytes_per_s * 8e-9}});
    }
  } else {
    out["parallel"] = "";
    out["plan"] = nullptr;
  }
  for (const std::string& address : lost) {
    if (current && std::any_of(current->nodes.begin(), current->nodes.end(),
                               [&](const NodeProfile& p) { return p.address == address; })) {
      continue;  // a lost spare: listed with the pod's nodes
    }
    nlohmann::json n;
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      const auto known = st.known.find(address);
      if (known != st.known.end()) n = to_json(known->second);
    }
    n["address"] = address;
    n["index"] = nullptr;
    n["state"] = "lost";
    out["nodes"].push_back(std::move(n));
  }
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
  return out;
}

}  // namespace herd::cluster
