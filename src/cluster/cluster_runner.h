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
// Failure: heartbeats watch every node; a node that dies or stops answering fails the
// forward() in progress within seconds with an error naming it, and every later forward()
// with the same error. The process stays up (a server answers the next request with it).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runner.h"
#include "net/auth.h"
#include "net/heartbeat.h"
#include "net/messages.h"
#include "plan/node_profile.h"
#include "plan/plan.h"

namespace herd::cluster {

struct ClusterOptions {
  std::vector<std::string> peers;  // "host:port" of each node besides this process
  PlanOptions plan;                // mode, MoE mode, use_local (--no-local)
  engine::LocalOptions local;      // threads, n_ctx, n_seq, kernels for the local stage
  net::WireDType wire_dtype = net::WireDType::F32;
  // Consecutive stages on nodes pass activations straight to each other. false: every
  // stage's through this process (the way before stage links; for comparison).
  bool stage_links = true;
  std::shared_ptr<const net::ClusterKey> key;  // null: insecure mode
  std::string name = "coordinator";
  net::Millis connect_timeout{5000};
  net::HeartbeatOptions heartbeat;
  FILE* progress = nullptr;        // where loading and shipping progress goes; null: silent
  double local_bandwidth_gbs = 0;  // this machine's for the planner; 0: measured
};

// Per-stage figures since open() or reset_stats().
struct StageStats {
  std::string node;  // "local" or the node's name
  int64_t layer_begin = 0, layer_end = 0;
  int64_t batches = 0;
  int64_t tokens = 0;
  double compute_seconds = 0;  // the stage's own forward time
  double busy_seconds = 0;     // from sending a batch to having its result (compute + wire)
  uint64_t bytes_sent = 0;     // by the coordinator to this stage's node
  uint64_t bytes_received = 0;
  // Bytes that came to this stage's ranks straight from the previous stage (stage links:
  // both run on nodes), not through the coordinator.
  uint64_t link_bytes_received = 0;
};

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

  const Plan& plan() const;
  const std::vector<NodeProfile>& nodes() const;
  std::vector<StageStats> stage_stats() const;
  void reset_stats();
  // Seconds forward() has spent since open() or reset_stats() (for the pipeline bubble).
  double forward_seconds() const;

  // The pod as it is now, for the live view (GET /api/cluster) and `herd nodes`:
  //   {"state": "ok" | "recovering" | "degraded", "reason": text,
  //    "parallel": plan.parallel, "plan": to_json(plan),
  //    "nodes": [to_json(NodeProfile) + {"index", "state": "up" | "unused" | "lost"}],
  //    "stages": [{"index", "node", "layers": [begin, end), "batches", "tokens",
  //                "compute_seconds", "busy_seconds", "bytes_sent", "bytes_received"}],
  //    "forward_seconds", "events": [{"time": unix seconds, "kind", "text"}]}
  // Safe from any thread while forward() runs.
  nlohmann::json status() const;

  struct Impl;

 private:
  explicit ClusterRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::cluster
