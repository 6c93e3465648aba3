// Made-up models and nodes the planner's tests share (planner_test, device_ranks_test).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan_check.h"
#include "plan/plan_model.h"
#include "plan/planner.h"

namespace herd::test_plans {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// A llama-shaped model in Q4_K: n_embd 4096, 32 heads of 128 (8 KV heads) unless told.
inline PlanModel llama(int64_t n_layer, int64_t n_head = 32, int64_t n_head_kv = 8,
                       int64_t n_ff = 11008, int64_t n_vocab = 32000) {
  HParams hp;
  hp.n_vocab = n_vocab;
  hp.n_embd = 4096;
  hp.n_ff = n_ff;
  hp.n_layer = n_layer;
  hp.n_head = n_head;
  hp.n_head_kv = n_head_kv;
  hp.head_dim = 4096 / n_head;
  hp.head_dim_v = hp.n_rot = hp.head_dim;
  hp.n_ctx = 4096;
  return synthetic_plan_model(*find_arch("llama"), hp, TensorType::Q4_K);
}

inline PlanModel qwen3moe(int64_t n_layer, int64_t n_expert = 128) {
  HParams hp;
  hp.n_vocab = 151936;
  hp.n_embd = 2048;
  hp.n_layer = n_layer;
  hp.n_head = 32;
  hp.n_head_kv = 4;
  hp.head_dim = 128;
  hp.head_dim_v = hp.n_rot = hp.head_dim;
  hp.n_ctx = 4096;
  hp.n_expert = n_expert;
  hp.n_expert_used = 8;
  hp.n_ff_expert = 768;
  return synthetic_plan_model(*find_arch("qwen3moe"), hp, TensorType::Q4_K);
}

// A node of 8 cores, `gib` GiB free, reading at `bandwidth_gbs`; "local" is the coordinator.
inline NodeProfile node(std::string name, double gib, double bandwidth_gbs) {
  NodeProfile n;
  n.name = name;
  n.address = name == "local" ? "local" : name + ":7000";
  n.cores = 8;
  n.free_memory_bytes = static_cast<uint64_t>(gib * static_cast<double>(kGiB));
  n.bandwidth_gbs = bandwidth_gbs;
  return n;
}

// plan() and the checks every plan must pass.
inline Plan checked_plan(const PlanModel& m, const std::vector<NodeProfile>& nodes,
                         const PlanOptions& o) {
  Plan p = plan(m, nodes, o);
  check_plan(p, m, nodes, o);
  EXPECT_EQ(plan_from_json(to_json(p)), p);
  return p;
}

}  // namespace herd::test_plans
