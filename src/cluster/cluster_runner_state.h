// Private to cluster/: the coordinator's inner parts, shared by the files that make up
// ClusterRunner (cluster_runner.h says what it does):
//   cluster_runner.cpp  the runner's public methods and the forward through the pipeline
//   pod_forming.cpp     connecting, profiling, planning, loading a pod (form_pod)
//   recovery.cpp        a lost node: forming the pod again; nodes taken in
//   cluster_status.cpp  status(), cluster_json() for GET /api/cluster, and the figures
//   pod_states.cpp      recurrent states: snapshots and held copies on every rank (STATE)
// Threads and locks: as cluster_runner.h says (forward_mutex_, State::mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/assignment.h"
#include "cluster/cluster_runner.h"
#include "cluster/link_probe.h"
#include "cluster/ring_links.h"
#include "engine/rank.h"
#include "engine/recurrent_states.h"
#include "engine/shard.h"
#include "model/model_info.h"
#include "net/messages.h"
#include "net/tcp_transport.h"
#include "plan/plan_model.h"
#include "plan/predict.h"
#include "plan/spares.h"
#include "util/thread_pool.h"

namespace herd::cluster {
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
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

// A spare's place: the node (an index into the pod's nodes) and the rank it stands by for
// (plan/spares.h).
using Shadow = Spare;

// One rank of a stage: run here (part) or on a node (connection).
struct RankRunner {
  int node = 0;
  std::string node_name;
  Assignment assignment;
  std::unique_ptr<engine::Rank> part;       // when this process runs the rank
  std::unique_ptr<RingAllReduce> ring;      // this process's tensor-parallel rank
  std::shared_ptr<net::Connection> remote;  // else
  std::vector<float> output;                // [n][hidden_width] or [n_logits][its vocabulary rows]
  uint64_t compute_ns = 0;
  engine::RecurrentStates states;  // of `part`'s slots (a node keeps its own)

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

// What outlives one pod: the model file (its tokenizer's views stay valid across
// re-plans), the options, this machine's profile (measured once), the nodes it has known.
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
  // [n_seq] positions each sequence holds in the pod (where a request begins); 0 in a new pod.
  std::vector<size_t> seq_len;
  std::vector<Shadow> last_spares;           // of the last pod formed (node: index into its nodes)
  std::map<std::string, LinkProfile> links;  // by address: measured once, when first reached
  NodeLinks node_links;  // between nodes, by their addresses: measured once (link_probe.h)

  mutable std::mutex mutex;           // guards what status(), cluster_json() read below
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

// One pod. Its forward through the pipeline is in cluster_runner.cpp, load_remote in
// pod_forming.cpp; form_pod makes it.
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

  // Recurrent states (pod_states.cpp). Operations wait in `pending_states` for the next
  // forward() or run_states(), which sends them (after the waiting ones) to every rank in one
  // STATE each, does them on this process's ranks, and waits for every answer: the lowest
  // and highest outcome over the ranks of each of `ops` (a restore's position).
  struct StateOutcome {
    int64_t low = 0, high = 0;
  };
  std::vector<net::StateOp> pending_states;
  uint64_t state_id = 0;  // frame id of the last STATE sent
  std::vector<StateOutcome> run_states(const std::vector<net::StateOp>& ops);
  bool holds_states() const;
  // "host:port" of the nodes whose connection (or a ring link to them) broke.
  std::vector<std::string> lost_nodes() const;
  void run_stage(StageRunner& s, Job& job);
  void send_batch(StageRunner& s, Job& job);
  void receive_result(StageRunner& s, Job& job);
  // The figures of the stages of s's chain, for a batch whose result came back.
  void count_stage_stats(StageRunner& s, const Job& job, uint64_t compute_ns,
                         const std::vector<uint64_t>& upstream_ns, uint64_t received);
  net::Frame receive_from_chain(StageRunner& s, RankRunner& rank);
  void pass_on(StageRunner& s, Job job);
  void worker(StageRunner& s);
  void receiver(StageRunner& s);
  void finish(Job job);
  void fail(const std::string& message);
  // `load` holds the model's hash, path and store name; its plan is the rank's.
  void load_remote(RankRunner& s, net::Load load);
  ~Impl();
};

// A pod formed again with spares in the places of lost nodes: the old plan with its node
// indices renumbered for the new peer list, and the spares that still stand by.
struct KeptPlan {
  Plan plan;
  std::vector<Shadow> spares;
};

// ---- pod_forming.cpp ----

// How this process dials nodes over TCP: its name and the security options.
net::TcpTransportOptions tcp_options(const ClusterOptions& o);

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
                                              const KeptPlan* kept = nullptr);

}  // namespace herd::cluster
