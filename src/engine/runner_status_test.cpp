// LocalRunner::status() and the pod figures' defaults: what serve and bench read of a process
// that runs the whole model, through the ModelRunner interface.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/runner.h"
#include "kernels/matmul.h"

namespace herd::engine {
namespace {

TEST(RunnerStatusTest, TheLocalRunnerSaysItsThreadsIsaBytesAndOneStage) {
  LocalOptions o;
  o.threads = 2;
  o.n_ctx = 64;
  o.n_seq = 2;
  o.isa_limit = kernels::Isa::kAvx2;
  auto local = LocalRunner::open("../shared/models/llama-q4_0.gguf", o);
  const ModelRunner& runner = *local;
  const RunnerStatus s = runner.status();
  EXPECT_EQ(s.node, "local");
  EXPECT_FALSE(s.pod);
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.isa, kernels::isa_name(kernels::best_isa(kernels::detect_cpu(), o.isa_limit)));
  EXPECT_EQ(s.device, "cpu");
  EXPECT_EQ(s.device_index, -1);
  EXPECT_EQ(s.device_bytes, 0u);
  // Two slots of 64 positions, every layer's K and V.
  const HParams& hp = runner.hparams();
  EXPECT_GE(s.kv_cache_bytes, static_cast<uint64_t>(2 * 64 * hp.n_layer * 2));
  EXPECT_EQ(s.kv_cache_bytes, local->shard().kv_cache_bytes());
  EXPECT_EQ(s.packed_weight_bytes, local->shard().packed_weight_bytes());
  if (s.isa == "avx2") {
    EXPECT_GT(s.packed_weight_bytes, 0u);  // q4_0 is repacked for AVX2
  }
  EXPECT_EQ(s.parallel, "single");
  ASSERT_EQ(s.stages.size(), 1u);
  EXPECT_EQ(s.stages[0].layer_begin, 0);
  EXPECT_EQ(s.stages[0].layer_end, hp.n_layer);
  ASSERT_EQ(s.stages[0].ranks.size(), 1u);
  const RankStatus& rank = s.stages[0].ranks[0];
  EXPECT_EQ(rank.node, "local");
  EXPECT_EQ(rank.head_begin, 0);
  EXPECT_EQ(rank.head_end, hp.n_head);
  EXPECT_EQ(rank.memory_bytes,
            runner.info().weight_bytes + s.packed_weight_bytes + s.kv_cache_bytes);

  // One process keeps no pod figures: the interface's defaults.
  EXPECT_TRUE(runner.stage_stats().empty());
  EXPECT_EQ(runner.forward_seconds(), 0);
  EXPECT_EQ(runner.prediction(64).decode_tokens_per_s, 0);
  EXPECT_TRUE(runner.cluster_json().is_null());
}

TEST(RunnerStatusTest, KvBytesFollowTheSlots) {
  LocalOptions o;
  o.threads = 1;
  o.n_ctx = 64;
  const uint64_t one =
      LocalRunner::open("../shared/models/llama-q4_0.gguf", o)->status().kv_cache_bytes;
  o.n_seq = 3;
  const uint64_t three =
      LocalRunner::open("../shared/models/llama-q4_0.gguf", o)->status().kv_cache_bytes;
  EXPECT_GT(one, 0u);
  EXPECT_EQ(three, 3 * one);
}

}  // namespace
}  // namespace herd::engine
