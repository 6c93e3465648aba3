// ClusterRunner: the coordinator. It asks every peer for its profile, makes the Plan,
// gives each node its stage (shipping weights to nodes that lack them), and then runs
// batches through the pipeline as one ModelRunner: generation, eval, bench and serve use
// it exactly like the local runner.
//
// Execution: every stage has a worker thread and an input queue. forward() cuts a batch
// into micro-batches (a long prompt into chunks, several sequences' decode tokens into
// groups) and feeds them to stage 0; while stage 1 works on chunk i, stage 0 works on
// chunk i+1, so stages overlap. Each worker runs its stage (locally, or by a FORWARD to
// its node and the RESULT back) and passes the output on; the last stage's logits are
// gathered in batch order. Hidden states travel in F32 (bit-identical to one process) or
// F16 (--wire-dtype f16).
//
// Stage links: consecutive stages that both run on nodes pass hidden states straight to
// each other (links set up at load time, like the tensor-parallel rings). Such a chain is
// run by its first stage's worker, which sends each micro-batch as it comes, and a
// receiver thread, which takes the chain's results from its last stage (each with every
// stage's compute time); the stages after the first in a chain do nothing here. So the
// coordinator's bytes per token do not grow with the number of stages.
//
// Failure: heartbeats watch every node; a node that dies or stops answering breaks the
// forward() in progress within 2 s. The runner then forms a new pod of the nodes that
// still answer (the planner again, weights from their files, caches or shipped), whose
// slots are empty: forward() throws engine::StatesLost, and the scheduler runs every
// sequence's tokens again from position 0 (the caller sees a pause). When the survivors
// cannot hold the model, forward() throws a clear error (and unavailable() says why) until
// enough nodes answer again; it tries again at most once a second. At a request boundary,
// nodes that were lost (or newly discovered) and answer again are taken in (a new pod: its
// first forward() throws StatesLost too). docs/cluster.md describes it.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runner.h"
#include "net/auth.h"
#include "net/heartbeat.h"
#include "net/messages.h"
#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/predict.h"

namespace herd::cluster {

struct ClusterOptions {
  std::vector<std::string> peers;  // "host:port" ("rank:N" over MPI) of each other node
  PlanOptions plan;                // mode, MoE mode, use_local (--no-local)
  engine::LocalOptions local;      // threads, n_ctx, n_seq, kernels for the local stage
  net::WireDType wire_dtype = net::WireDType::F32;
  // Consecutive stages on nodes pass activations straight to each other. false: every
  // stage's through this process (the way before stage links; for comparison).
  bool stage_links = true;
  std::shared_ptr<const net::ClusterKey> key;         // null: insecure mode
  std::shared_ptr<const net::NodeIdentity> identity;  // null: a fresh one per connection
  std::shared_ptr<const net::AllowList> allowed_ids;  // null: any node id
  bool plaintext = false;  // --insecure: frames unencrypted (nodes must say the same)
  // How nodes are reached: null: a TcpTransport per pod ("host:port" peers, HELLO with
  // `key`); else this one for every pod (an MpiTransport: "rank:N" peers).
  std::shared_ptr<net::Transport> transport;
  // The model's name in this machine's store (--model org/repo[:QUANT]): repo and the first
  // file's path there, with its size. nullopt: the file's base name. LOAD passes it on so a
  // node may map its own copy (cluster/local_model.h).
  std::optional<net::StoreName> store_name;
  std::string name = "coordinator";
  net::Millis connect_timeout{5000};
  net::HeartbeatOptions heartbeat;
  FILE* progress = nullptr;        // where loading and shipping progress goes; null: silent
  double local_bandwidth_gbs = 0;  // this machine's for the planner; 0: measured
  // --spare N: the last N nodes that answer stand by, each with a remote rank's weights
  // loaded, to take its node's place when it is lost (no shipment). Fewer when
  // the others cannot hold the model.
  int spares = 0;
  // "host:port" of the nodes seen on the LAN now (--peers auto); empty: none.
  std::function<std::vector<std::string>()> discover;
  // Measure the link to each node when first reached (cluster/link_probe.h); false: every
  // link is assumed (plan/predict.h), as in tests that need no figures.
  bool measure_links = true;
  std::chrono::microseconds test_link_delay{0};  // test only: net/delayed_connection.h
};

// Per-stage figures since open() or reset_stats() (runner_status.h).
using StageStats = engine::StageStats;

class ClusterRunner : public engine::ModelRunner {
 public:
  // Throws herd::Error naming the node or the problem (unreachable peer, refused key, a
  // model that does not fit, a failed load).
  static std::unique_ptr<ClusterRunner> open(const std::string& path,
                                             const ClusterOptions& options);
  ~ClusterRunner() override;  // says BYE to every node

  const HParams& hparams() const override;
  int64_t n_ctx() const override;
  int64_t n_seq() const override;
  void forward(const engine::Batch& batch, std::vector<float>& logits) override;
  const gguf::File& file() const override;
  const ModelInfo& info() const override;
  std::string describe() const override;
  // node "coordinator", pod, device "pod", isa "cluster", the options' threads, and the plan's
  // stages with each rank's node; KV and packed bytes 0 (each node reports its own).
  engine::RunnerStatus status() const override;

  const Plan& plan() const;
  const std::vector<NodeProfile>& nodes() const;
  std::vector<StageStats> stage_stats() const override;
  void reset_stats() override;
  // Seconds forward() has spent since open() or reset_stats() (for the pipeline bubble).
  double forward_seconds() const override;
  // How fast the pod's plan should run (plan/predict.h), on its nodes' measured links, for
  // a prompt of `prompt_tokens`.
  Prediction prediction(int64_t prompt_tokens) const override;

  // The pod as it is now, for the live view (GET /api/cluster) and `herd nodes`:
  //   {"state": "ok" | "recovering" | "degraded", "reason": text,
  //    "parallel": plan.parallel, "plan": to_json(plan),
  //    "nodes": [to_json(NodeProfile) + {"index", "state": "up" | "unused" | "spare" |
  //              "lost"}, a spare's + {"stands_by": {"stage", "rank", "node"}}, a node's
  //              + {"link": {"rtt_ms", "send_gbits", "receive_gbits", "measured"}}],
  //    "prediction": {"decode_tokens_per_s", "prefill_tokens_per_s"},
  //    "stages": [{"index", "node", "layers": [begin, end), "batches", "tokens",
  //                "compute_seconds", "busy_seconds", "bytes_sent", "bytes_received"}],
  //    "forward_seconds", "events": [{"time": unix seconds, "kind", "text"}]}
  // Safe from any thread while forward() runs.
  nlohmann::json cluster_json() const override;

  // Recurrent states on a pod (pod_states.cpp): every rank that holds layers (this
  // process's and each node's; a tensor-parallel rank its slice) does the same thing to its
  // own layers' states. Snapshots and held copies live with the pod: one formed again (a lost
  // node) has none, so restore_state answers 0 there. save_state, hold_state and
  // return_to_held_state go out with the next batch's or restore's STATE frame (one round
  // trip to the nodes for all operations since the last batch).
  void save_state(int32_t seq, int64_t pos) override;
  int64_t restore_state(int32_t seq, int64_t at_most) override;
  // When every rank can copy its states: not a part split over a GPU and the CPU.
  bool holds_states() const override;
  void hold_state(int32_t seq) override;
  void return_to_held_state(int32_t seq) override;

  // Why the pod cannot run the model now (the survivors of a failure cannot hold it), or
  // empty. The server answers 503 with it.
  std::string unavailable() const override;

  struct Impl;   // one pod: its plan, connections and stages
  struct State;  // what outlives a pod: the file, options, known nodes, events

 private:
  ClusterRunner(std::unique_ptr<State> state, std::shared_ptr<Impl> pod);
  std::shared_ptr<Impl> pod() const;  // null while none is formed
  void set_pod(std::shared_ptr<Impl> pod);
  void remember_pod(const Impl& pod);
  std::vector<std::string> all_peers() const;  // named, then discovered
  // Forms a pod of the nodes that answer, except `skip` (nodes just lost: a stopped one
  // would hold the recovery up for the connect timeout); throws when it cannot hold the
  // model (the runner is then "degraded"). A node that cannot load its part is left out and
  // the pod formed again without it. The new pod's slots are empty: the next forward()
  // throws StatesLost.
  std::shared_ptr<Impl> form_again(std::vector<std::string> skip = {});
  // forward()'s recovery: form_again(lost), the new pod set and its event recorded.
  std::shared_ptr<Impl> recover(const std::vector<std::string>& lost);
  // The pod's nodes whose connections broke, waiting up to the heartbeat's timeout for one.
  std::vector<std::string> settled_lost_nodes(const Impl& pod) const;
  std::string named_nodes(const std::vector<std::string>& addresses) const;  // "'a' (addr)"
  // On the mender's thread: which lost (or newly discovered) nodes answer again.
  void probe_returning();
  // At a request boundary: the nodes probe_returning() found are taken into the pod.
  void take_in_returning();

  // Once a second: browses the LAN (with options.discover); while degraded, tries to form
  // a pod (between forward() calls); else probes the nodes that are not in the pod.
  void mend();

  // Threads: forward() (the engine's) and mend() take turns under forward_mutex_, so what
  // only they touch (State::seq_len, known, states_lost_, recoveries_) needs no other lock;
  // status(), cluster_json(), unavailable() and describe() (any thread) read pod_, the last
  // plan and State's status fields under state_->mutex.
  std::unique_ptr<State> state_;
  std::mutex forward_mutex_;  // forward() and mend() take turns
  std::mutex mender_mutex_;
  std::condition_variable mender_wake_;
  bool stopping_ = false;
  std::thread mender_;
  std::shared_ptr<Impl> pod_;  // guarded by state_->mutex
  int64_t n_ctx_ = 0, n_seq_ = 0;
  Plan last_plan_;                       // written under state_->mutex (remember_pod)
  std::vector<NodeProfile> last_nodes_;  // likewise
  // A pod was formed since the last forward(): its slots are empty, which the next forward()
  // says (StatesLost) before it runs anything.
  bool states_lost_ = false;
  int recoveries_ = 0;  // pods formed again after a failed batch since one last ran
};

}  // namespace herd::cluster
