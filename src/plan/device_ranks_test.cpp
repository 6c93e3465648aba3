// A node's GPU in the plan: where each rank's part sits on it, the memory and speed it adds.
#include "plan/device_ranks.h"

#include <gtest/gtest.h>

#include "plan/plan_check.h"
#include "plan/plan_table.h"
#include "plan/planner.h"
#include "plan/rank_memory.h"
#include "plan/test_plans.h"
#include "util/error.h"

namespace herd {
namespace {

using namespace test_plans;

NodeProfile with_gpu(NodeProfile n, double gib, double bandwidth_gbs) {
  n.devices.push_back({"vulkan:0", "Test GPU (discrete)",
                       static_cast<uint64_t>(gib * static_cast<double>(kGiB)), bandwidth_gbs,
                       false});
  return n;
}

bool has_note(const Plan& p, const std::string& text) {
  for (const std::string& note : p.notes) {
    if (note.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(DeviceRanks, AModelThatFitsTheGpuRunsThere) {
  const PlanModel m = llama(8);  // ~0.9 GiB
  const Plan p = checked_plan(m, {with_gpu(node("local", 32, 50), 24, 900)}, PlanOptions{});
  ASSERT_EQ(p.stages.size(), 1u);
  const Rank& r = p.stages[0].ranks[0];
  EXPECT_EQ(r.device, "vulkan:0");
  EXPECT_EQ(r.placement, "device");
  EXPECT_TRUE(has_note(p, "all on vulkan:0"));
}

TEST(DeviceRanks, AnMoeModelLargerThanTheGpuKeepsItsExpertsOnTheCpu) {
  const PlanModel m = qwen3moe(48);  // ~17 GiB, of which ~16 GiB routed experts
  ASSERT_GT(m.weight_bytes(), 12 * kGiB);
  const Plan p = checked_plan(m, {with_gpu(node("local", 64, 50), 8, 900)}, PlanOptions{});
  const Rank& r = p.stages[0].ranks[0];
  EXPECT_EQ(r.placement, "experts-on-cpu");
  EXPECT_TRUE(has_note(p, "without its routed experts")) << p.notes.back();
  const std::string table =
      plan_table(p, m, {with_gpu(node("local", 64, 50), 8, 900)}, PlanOptions{});
  EXPECT_NE(table.find("all but the routed experts"), std::string::npos) << table;
}

TEST(DeviceRanks, ADenseModelLargerThanTheGpuIsSplitByLayersAndBothMemoriesCount) {
  const PlanModel m = llama(160);  // ~15 GiB, and 2.5 GiB of cache
  ASSERT_GT(m.weight_bytes(), 14 * kGiB);
  // Neither 12 GiB of RAM nor a 10 GiB GPU holds it; both together do.
  const NodeProfile cpu_only = node("local", 12, 50);
  EXPECT_THROW(plan(m, {cpu_only}, PlanOptions{}), Error);
  const Plan p = checked_plan(m, {with_gpu(cpu_only, 10, 900)}, PlanOptions{});
  const Rank& r = p.stages[0].ranks[0];
  EXPECT_EQ(r.placement, "first-layers");
  EXPECT_GT(r.device_layers, 50);
  EXPECT_LT(r.device_layers, 100);
}

TEST(DeviceRanks, AOneRankStageOfAPodSplitsItsPartOverItsGpuAndCpu) {
  const PlanModel m = llama(32);  // ~3.7 GiB
  PlanOptions o;
  o.mode = PlanOptions::Mode::kPipeline;
  const std::vector<NodeProfile> nodes = {node("local", 32, 50),
                                          with_gpu(node("big", 32, 50), 16, 900),
                                          with_gpu(node("small", 32, 50), 0.25, 900)};
  const Plan p = checked_plan(m, nodes, o);
  ASSERT_EQ(p.stages.size(), 3u);
  bool saw_small = false;
  for (const Stage& s : p.stages) {
    const Rank& r = s.ranks[0];
    if (r.node == 1) {
      EXPECT_EQ(r.placement, "device");
    }
    if (r.node == 2) {
      // 0.25 GiB holds no stage of this model: the first layers there, the rest on the CPU.
      saw_small = true;
      EXPECT_EQ(r.device, "vulkan:0");
      EXPECT_EQ(r.placement, "first-layers");
      EXPECT_GE(r.device_layers, 1);
      EXPECT_LT(r.device_layers, s.layer_end - s.layer_begin);
    }
    if (r.node == 0) {
      EXPECT_EQ(r.device, "");
    }
  }
  EXPECT_TRUE(saw_small);
  EXPECT_FALSE(has_note(p, "not yet split"));
  // The GPU's bandwidth makes its stage the fastest: it gets the most layers.
  int64_t most = 0;
  int most_node = -1;
  for (const Stage& s : p.stages) {
    if (s.layer_end - s.layer_begin > most) {
      most = s.layer_end - s.layer_begin;
      most_node = s.ranks[0].node;
    }
  }
  EXPECT_EQ(most_node, 1);
}

TEST(DeviceRanks, AnMoeStageOfAPodKeepsItsExpertsOnItsNodesCpu) {
  const PlanModel m = qwen3moe(48);  // ~17 GiB, of which ~16 GiB routed experts
  PlanOptions o;
  o.mode = PlanOptions::Mode::kPipeline;
  // The two nodes' RAM does not hold it; with the GPU's memory they do.
  const std::vector<NodeProfile> nodes = {node("local", 10, 50),
                                          with_gpu(node("gpu", 10, 50), 8, 900)};
  EXPECT_GT(node_capacity(nodes[1], o, true), node_capacity(nodes[1], o, false));
  const Plan p = checked_plan(m, nodes, o);
  ASSERT_EQ(p.stages.size(), 2u);
  const Rank& r = p.stages[1].ranks[0];
  ASSERT_EQ(r.node, 1);
  EXPECT_EQ(r.device, "vulkan:0");
  EXPECT_EQ(r.placement, "experts-on-cpu");
}

TEST(DeviceRanks, TensorRanksRunOnOneDeviceAndTheCoordinatorSplitsLikeANode) {
  const PlanModel m = llama(32);  // ~3.7 GiB
  PlanOptions o;
  o.mode = PlanOptions::Mode::kTensor;
  const std::vector<NodeProfile> tensor = {with_gpu(node("local", 32, 50), 0.25, 900),
                                           with_gpu(node("b", 32, 50), 0.25, 900)};
  const Plan tp = checked_plan(m, tensor, o);
  ASSERT_EQ(tp.stages.size(), 1u);
  ASSERT_EQ(tp.stages[0].ranks.size(), 2u);
  for (const Rank& r : tp.stages[0].ranks) EXPECT_EQ(r.device, "") << "its slice outgrows 0.25 GiB";
  EXPECT_TRUE(has_note(tp, "a tensor-parallel rank runs on one device"));
  o.mode = PlanOptions::Mode::kPipeline;
  const std::vector<NodeProfile> pod = {with_gpu(node("local", 32, 50), 0.25, 900),
                                        node("b", 32, 50)};
  const Plan pp = checked_plan(m, pod, o);
  ASSERT_EQ(pp.stages.size(), 2u);
  EXPECT_EQ(pp.stages[0].ranks[0].node, 0);
  // The coordinator's stage outgrows its 0.25 GiB GPU: its first layers there, the rest on
  // its CPU (it loads its part as an engine::Rank, as a node does).
  EXPECT_EQ(pp.stages[0].ranks[0].device, "vulkan:0");
  EXPECT_EQ(pp.stages[0].ranks[0].placement, "first-layers");
  EXPECT_TRUE(rank_splits(1));
  EXPECT_FALSE(rank_splits(2));
}

TEST(DeviceRanks, AGpuThatCannotRunTheModelIsLeftOutWithItsReason) {
  HParams hp;
  hp.n_vocab = 32000;
  hp.n_embd = 4096;
  hp.n_ff = 11008;
  hp.n_layer = 4;
  hp.n_head = hp.n_head_kv = 2;
  hp.head_dim = hp.head_dim_v = hp.n_rot = 2048;  // wider heads than the attention shader's
  hp.n_ctx = 4096;
  const PlanModel m = synthetic_plan_model(*find_arch("llama"), hp, TensorType::Q4_K);
  const Plan p = checked_plan(m, {with_gpu(node("local", 32, 50), 24, 900)}, PlanOptions{});
  EXPECT_EQ(p.stages[0].ranks[0].device, "");
  EXPECT_TRUE(has_note(p, "cannot run llama yet (heads wider than 1024)"));
}

TEST(DeviceRanks, ProfilesCarryTheirDevicesThroughJson) {
  const NodeProfile n = with_gpu(node("gpu-box", 64, 80), 24, 936);
  const std::vector<NodeProfile> back = node_profiles_from_text(to_json(n).dump(), "test");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], n);
  // A profile written before devices existed has none.
  nlohmann::json old = to_json(node("old", 8, 20));
  old.erase("devices");
  EXPECT_TRUE(node_profiles_from_text(old.dump(), "old")[0].devices.empty());
  nlohmann::json bad = to_json(n);
  bad["devices"][0]["memory_bytes"] = -5;
  EXPECT_THROW(node_profiles_from_text(bad.dump(), "bad"), Error);
  bad = to_json(n);
  bad["devices"] = "vulkan:0";
  EXPECT_THROW(node_profiles_from_text(bad.dump(), "bad"), Error);
}

TEST(DeviceRanks, NodeCapacityAndReadSeconds) {
  const NodeProfile n = with_gpu(node("n", 10, 50), 20, 1000);
  PlanOptions o;  // 90% headroom
  EXPECT_EQ(node_capacity(n, o, true), usable_memory(n, o) + 18 * kGiB);
  EXPECT_EQ(node_capacity(n, o, false), 18 * kGiB);
  // Within the GPU: its bandwidth; beyond it, alone: the rest from the CPU.
  EXPECT_NEAR(node_read_seconds(n, 10e9, o, true), 10e9 / 1000e9, 1e-12);
  const double room = 0.9 * 20 * double(kGiB);
  EXPECT_NEAR(node_read_seconds(n, 30e9, o, true), room / 1000e9 + (30e9 - room) / 50e9, 1e-9);
  EXPECT_NEAR(node_read_seconds(n, 30e9, o, false), 30e9 / 50e9, 1e-12);
  // An integrated GPU adds no memory of its own.
  NodeProfile apu = n;
  apu.devices[0].unified = true;
  EXPECT_EQ(node_capacity(apu, o, true), usable_memory(apu, o));
}

}  // namespace
}  // namespace herd
