// The memory a rank of a plan needs: its weights, its KV cache and scratch buffers. One
// function, used by the planner to decide and by check_plan() and the table to report,
// so that what is checked is what was planned. An estimate: the weights are the file's
// bytes of the rank's slices (repacked copies replace the mapped pages, engine/shard.h),
// the KV cache is F16, the scratch follows the buffers of Shard::forward.
#pragma once

#include <cstdint>
#include <string>

#include "plan/node_profile.h"
#include "plan/plan.h"
#include "plan/plan_model.h"

namespace herd {

// What one rank holds, as counts: the planner's view before ranges are placed.
struct RankLoad {
  int64_t layer_begin = 0;  // the stage's first layer (layers differ in their caches)
  int64_t n_layers = 0;
  int64_t n_recurrent = 0;  // of which keep a recurrent state, not a KV cache
  PlanLayer layers;         // sums over the stage's layers
  int64_t heads = 0;        // query heads of each layer
  int64_t kv_heads = 0;     // KV heads of each layer
  int64_t ffn_cells = 0;    // FFN rows x experts held, of n_ff x max(1, n_expert)
  int64_t vocab_rows = 0;   // output head rows
  bool embedding = false;
  bool output = false;  // holds the output norm, and vocab_rows rows of the head
};

struct MemoryEstimate {
  uint64_t weights = 0;
  uint64_t kv_cache = 0;
  uint64_t scratch = 0;
  uint64_t total() const { return weights + kv_cache + scratch; }
};

MemoryEstimate estimate_memory(const PlanModel& model, const PlanOptions& options,
                               const RankLoad& load);
// The load of a placed rank. REQUIRES: the stage's layers lie inside the model.
RankLoad rank_load(const PlanModel& model, const Stage& stage, const Rank& rank);

// The bytes a plan may use on a node: its free memory times the headroom; on a node with
// unified memory and a known total, at most unified_model_limit(total) as well.
uint64_t usable_memory(const NodeProfile& node, const PlanOptions& options);
// The share of a unified memory of `total_bytes` a model may take: the total minus
// max(4 GiB, 25%), left to macOS, its apps and the GPU's own use. Why that rule: macOS
// lets the GPU wire at most ~75% of RAM above 36 GiB (66% below), and a CPU engine's
// pages compete with the same system; 4 GiB is what a Mac mini needs for the OS and a
// terminal. 16 GiB -> 12 GiB, 48 GiB -> 36 GiB, 192 GiB -> 144 GiB; 0 below 4 GiB.
uint64_t unified_model_limit(uint64_t total_bytes);
// ceil(total * part / whole) without overflow: the bytes of `part` of `whole` equal units.
// REQUIRES: 0 <= part <= whole, whole > 0.
uint64_t slice_bytes(uint64_t total, int64_t part, int64_t whole);
// "12.34 GiB" from 1 GiB up, else "123.4 MiB".
std::string memory_text(uint64_t bytes);

}  // namespace herd
