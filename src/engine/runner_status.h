// What a ModelRunner says about itself (ModelRunner::status() and the figures beside it), for
// the callers that report it: serve's /api/node and /api/cluster, bench's summary and JSON.
// Callers read these and never ask which runner they hold; a runner fills in what it has and
// leaves the rest at the defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::engine {

// One rank of a stage: who runs it and its share of the stage.
struct RankStatus {
  std::string node;     // "local" (this process alone), "coordinator", or a pod node's name
  std::string address;  // where the node answers ("host:port"); "local" for this process alone
  int64_t head_begin = 0, head_end = 0;  // its attention heads, [begin, end)
  uint64_t memory_bytes = 0;             // weights and KV cache it holds
};

// One pipeline stage: a range of layers run by one or more tensor-parallel ranks.
struct StageStatus {
  int64_t layer_begin = 0, layer_end = 0;
  std::vector<RankStatus> ranks;
};

struct RunnerStatus {
  // Who runs the model: "local" (this process) or "coordinator" (this process runs a pod).
  std::string node = "local";
  // true: a pod of nodes runs the model, as `stages` say, and the one-machine figures below
  // (device, ISA, KV and packed bytes) are theirs, not this process's: each node reports its
  // own. false: this process runs all of it.
  bool pod = false;
  // This process's compute threads (a pod: the --threads asked for its local ranks; 0: all
  // cores).
  int threads = 0;
  std::string isa;  // kernels::isa_name of the CPU kernels ("avx512", ...); "cluster" for a pod
  // Where the forward pass runs: "cpu", or the device's name and the memory it holds there;
  // "pod" for a pod.
  std::string device = "cpu";
  int device_index = -1;  // the device's index (vulkan:N) when the model runs on one, else -1
  uint64_t device_bytes = 0;
  // The KV cache and the repacked weights (beside the file's) of the model in this process;
  // 0 for a pod.
  uint64_t kv_cache_bytes = 0;
  uint64_t packed_weight_bytes = 0;
  // The plan: "single" for one process; a pod's plan.parallel ("pipeline", "tensor", ...).
  std::string parallel = "single";
  std::vector<StageStatus> stages;  // in order; one for a process that runs the whole model
};

// Per-stage figures since the runner opened or reset_stats() (a pod's; a runner that is one
// process counts none).
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

// How fast a runner should run (plan/predict.h computes it for a pod's plan); all 0: no
// prediction made.
struct Prediction {
  double decode_tokens_per_s = 0;
  double prefill_tokens_per_s = 0;  // 0 when a node holding layers has no matmul speed
  // Per decoded token: reading weights, all-reduces, messages between processes.
  double decode_compute_seconds = 0;
  double decode_allreduce_seconds = 0;
  double decode_wire_seconds = 0;
};

}  // namespace herd::engine
