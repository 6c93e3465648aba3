// ClusterRunner through the ModelRunner interface: what serve and bench read of a pod (its
// status, per-stage figures, prediction and live view), with a node daemon in this process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "cluster/cluster_runner.h"
#include "cluster/test_node.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

TEST(ClusterStatusTest, ThePodSaysItsStagesNodesAndFigures) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "status");
  TestNode node("node-a", cache);
  ClusterOptions o;
  o.peers = {node.address()};
  o.plan.mode = PlanOptions::Mode::kPipeline;
  o.local.threads = 1;
  o.local.n_ctx = 64;
  o.local_bandwidth_gbs = 10;  // as fast as the test node: each gets a stage
  auto cluster = ClusterRunner::open(model, o);
  engine::ModelRunner& runner = *cluster;

  const engine::RunnerStatus s = runner.status();
  EXPECT_EQ(s.node, "coordinator");
  EXPECT_TRUE(s.pod);
  EXPECT_EQ(s.threads, 1);
  EXPECT_EQ(s.isa, "cluster");
  EXPECT_EQ(s.device, "pod");
  EXPECT_EQ(s.device_index, -1);
  EXPECT_EQ(s.kv_cache_bytes, 0u);  // each node reports its own
  EXPECT_EQ(s.packed_weight_bytes, 0u);
  EXPECT_EQ(s.parallel, cluster->plan().parallel);
  ASSERT_EQ(s.stages.size(), 2u);
  EXPECT_EQ(s.stages.front().layer_begin, 0);
  EXPECT_EQ(s.stages.front().layer_end, s.stages.back().layer_begin);
  EXPECT_EQ(s.stages.back().layer_end, runner.hparams().n_layer);
  std::set<std::string> names;
  for (const engine::StageStatus& stage : s.stages) {
    ASSERT_EQ(stage.ranks.size(), 1u);
    const engine::RankStatus& rank = stage.ranks[0];
    names.insert(rank.node);
    if (rank.node == "node-a") {
      EXPECT_EQ(rank.address, node.address());
    }
    EXPECT_EQ(rank.head_begin, 0);
    EXPECT_EQ(rank.head_end, runner.hparams().n_head);
    EXPECT_GT(rank.memory_bytes, 0u);
  }
  EXPECT_EQ(names, (std::set<std::string>{"coordinator", "node-a"}));

  // The pod's figures, counted from a forward and zeroed by reset_stats().
  engine::Batch batch;
  for (int32_t i = 0; i < 4; ++i) batch.add(1 + i, 0, i, i == 3);
  std::vector<float> logits;
  runner.forward(batch, logits);
  const std::vector<engine::StageStats> stats = runner.stage_stats();
  ASSERT_EQ(stats.size(), 2u);
  for (const engine::StageStats& stage : stats) EXPECT_EQ(stage.tokens, 4);
  EXPECT_GT(runner.forward_seconds(), 0);
  runner.reset_stats();
  EXPECT_EQ(runner.stage_stats()[0].tokens, 0);
  EXPECT_EQ(runner.forward_seconds(), 0);
  EXPECT_GT(runner.prediction(64).decode_tokens_per_s, 0);
  const nlohmann::json view = runner.cluster_json();
  EXPECT_EQ(view["state"], "ok");
  EXPECT_EQ(view["stages"].size(), 2u);
  EXPECT_THAT(view["nodes"].dump(), ::testing::HasSubstr("node-a"));
}

}  // namespace
}  // namespace herd::cluster
