// Plan: how a model runs on a set of nodes. A pipeline of stages (in the order activations
// flow), each stage a contiguous range of layers run by one or more tensor-parallel ranks,
// each rank one node holding a slice of the stage's heads, FFN rows, experts and vocabulary.
// One machine running the whole model is the one-stage, one-rank plan. Made by plan()
// (planner.h), sent to nodes as JSON, printed by plan_table() (plan_table.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace herd {

struct PlanOptions {
  enum class Mode {
    kAuto,      // planner.h documents the rule
    kPipeline,  // every node its own stage
    kTensor,    // one stage, every node a rank
    kHybrid,    // pipeline_stages stages of tensor_ranks ranks each
  };
  enum class MoeMode {
    kAuto,            // expert-parallel when every rank of a stage can own an expert
    kExpertParallel,  // whole experts placed on ranks; every rank runs the router
    kSplitExperts,    // every expert split by rows across the ranks, like a dense FFN
  };
  Mode mode = Mode::kAuto;
  int pipeline_stages = 1;  // kHybrid only
  int tensor_ranks = 1;     // kHybrid only
  MoeMode moe = MoeMode::kAuto;
  int64_t n_ctx = 4096;          // positions per sequence the KV cache holds
  int64_t n_seq = 1;             // sequence slots in the KV cache
  int64_t n_batch = 256;         // tokens per forward pass: sizes the scratch buffers
  bool use_local = true;         // false (--no-local): node 0, the coordinator, holds no shard
  double memory_headroom = 0.9;  // share of a node's free memory the plan may use
};

// Parses --parallel: "auto", "pipeline", "tensor", "pipeline:P,tensor:T", and also
// "pipeline:P" (P one-rank stages) or "tensor:T" (one stage of T ranks). Sets
// options.mode, pipeline_stages and tensor_ranks; throws herd::Error("[plan] ...").
void parse_parallel(std::string_view text, PlanOptions& options);
// Parses --moe: "auto", "expert-parallel", "split-experts".
PlanOptions::MoeMode parse_moe_mode(std::string_view text);

// One node's share of a stage. Ranges are half-open [begin, end).
struct Rank {
  int node = 0;                          // index into the node list the plan was made for
  bool embedding = false;                // holds token_embd and turns token ids into activations
  int64_t head_begin = 0, head_end = 0;  // query heads
  int64_t kv_head_begin = 0, kv_head_end = 0;  // the KV heads its query heads read
  int64_t ff_begin = 0, ff_end = 0;        // FFN rows (of the dense FFN, or of each held expert)
  std::vector<int64_t> experts;            // MoE: experts it holds (rows ff_begin..ff_end of each)
  int64_t vocab_begin = 0, vocab_end = 0;  // output head rows (logits) it computes
  uint64_t memory_bytes = 0;  // estimated: weights + KV cache + scratch (rank_memory.h)
  // On a node with a GPU (device_ranks.h): the device ("vulkan:0"; "" the CPU) and how the
  // part sits on it: "device" (all of it), "experts-on-cpu" (the routed experts on the CPU,
  // the rest on the device), "first-layers" (the first device_layers layers on the device).
  std::string device;
  std::string placement;
  int64_t device_layers = 0;

  bool operator==(const Rank&) const = default;
};

struct Stage {
  int64_t layer_begin = 0, layer_end = 0;
  bool embedding = false;  // the first stage: its first rank embeds the tokens
  bool output = false;     // the last stage: output norm and head, logits
  std::vector<Rank> ranks;
  // KV heads that more than one rank holds (when there are more ranks than KV heads, or
  // a rank's query heads start inside a GQA group): each computes and caches them itself.
  std::vector<int64_t> shared_kv_heads;

  bool operator==(const Stage&) const = default;
};

struct Plan {
  std::string parallel;  // "single", "pipeline", "tensor" or "pipeline+tensor"
  std::string moe;       // "expert-parallel" or "split-experts" when an MoE stage has
                         // several ranks, else ""
  int64_t n_ctx = 0;
  int64_t n_seq = 0;
  std::vector<Stage> stages;       // in pipeline order: activations flow stage 0 -> 1 -> ...
  std::vector<std::string> notes;  // nodes left out and why, and other decisions to show

  bool operator==(const Plan&) const = default;
};

nlohmann::json to_json(const Plan& plan);
// Throws herd::Error("[plan] plan...: field '...' ...") on a missing or mistyped field.
// Checks types and ranges only; check_plan() (plan_check.h) checks it against a model.
Plan plan_from_json(const nlohmann::json& j);

}  // namespace herd
