// Examples: the plans for clusters a person can check by hand, the errors, the JSON.
#include "plan/planner.h"

#include <gtest/gtest.h>

#include "engine/shard.h"
#include "plan/apportion.h"
#include "plan/plan_check.h"
#include "plan/plan_table.h"
#include "plan/rank_memory.h"
#include "plan/shard_spec.h"
#include "plan/test_plans.h"
#include "util/error.h"

namespace herd {
namespace {

using namespace test_plans;

PlanOptions options(PlanOptions::Mode mode) {
  PlanOptions o;
  o.mode = mode;
  return o;
}

int64_t layers_of(const Stage& s) {
  return s.layer_end - s.layer_begin;
}

std::string error_of(const PlanModel& m, const std::vector<NodeProfile>& nodes,
                     const PlanOptions& o) {
  try {
    plan(m, nodes, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Planner, OneNodeRunsEverything) {
  const PlanModel m = llama(32);
  const Plan p = checked_plan(m, {node("local", 16, 50)}, PlanOptions{});
  EXPECT_EQ(p.parallel, "single");
  ASSERT_EQ(p.stages.size(), 1u);
  const Stage& s = p.stages[0];
  EXPECT_EQ(s.layer_begin, 0);
  EXPECT_EQ(s.layer_end, 32);
  EXPECT_TRUE(s.embedding && s.output);
  ASSERT_EQ(s.ranks.size(), 1u);
  const Rank& r = s.ranks[0];
  EXPECT_TRUE(r.embedding);
  EXPECT_EQ(r.head_end, 32);
  EXPECT_EQ(r.kv_head_end, 8);
  EXPECT_EQ(r.ff_end, 11008);
  EXPECT_EQ(r.vocab_end, 32000);
  // Weights plus an F16 KV cache of 32 layers x 8 KV heads x 128 x 2 x 2 bytes x 4096.
  EXPECT_GT(r.memory_bytes, m.weight_bytes() + uint64_t{32} * 8 * 128 * 4 * 4096);
}

TEST(Planner, TwoEqualNodesSplitLayersEvenly) {
  const PlanModel m = llama(32);
  const Plan p = checked_plan(m, {node("local", 16, 50), node("b", 16, 50)},
                              options(PlanOptions::Mode::kPipeline));
  EXPECT_EQ(p.parallel, "pipeline");
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_LE(std::abs(layers_of(p.stages[0]) - layers_of(p.stages[1])), 2);
  // The last stage also runs the output head, so it never gets more layers.
  EXPECT_GE(layers_of(p.stages[0]), layers_of(p.stages[1]));
  EXPECT_EQ(p.stages[0].ranks[0].node, 0);
  EXPECT_EQ(p.stages[1].ranks[0].node, 1);
}

TEST(Planner, KnownMatmulSpeedsBalancePrefillToo) {
  // A large vocabulary: the output head reads as much as 3.5 layers per decoded token but
  // runs for only the last prompt token. By bytes alone the last stage gets far fewer
  // layers, and prefill waits on the first stage.
  const PlanModel m = llama(16, 32, 8, 11008, 151936);
  std::vector<NodeProfile> nodes = {node("local", 16, 50), node("b", 16, 50)};
  const Plan by_bytes = checked_plan(m, nodes, options(PlanOptions::Mode::kPipeline));
  ASSERT_EQ(by_bytes.stages.size(), 2u);
  EXPECT_GE(layers_of(by_bytes.stages[0]) - layers_of(by_bytes.stages[1]), 3);
  for (NodeProfile& n : nodes) n.matmul_gflops = 200;
  const Plan both = checked_plan(m, nodes, options(PlanOptions::Mode::kPipeline));
  ASSERT_EQ(both.stages.size(), 2u);
  EXPECT_LE(layers_of(both.stages[0]) - layers_of(both.stages[1]), 2);
  EXPECT_GE(layers_of(both.stages[0]), layers_of(both.stages[1]));
  // A node that has not measured its matmul speed: bytes alone decide, for every node.
  nodes[1].matmul_gflops = 0;
  EXPECT_EQ(checked_plan(m, nodes, options(PlanOptions::Mode::kPipeline)), by_bytes);
}

TEST(Planner, AutoUsesTensorParallelismOnSimilarNodes) {
  const PlanModel m = llama(32);
  const Plan p = checked_plan(m, {node("local", 16, 50), node("b", 16, 45)}, PlanOptions{});
  EXPECT_EQ(p.parallel, "tensor");
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].ranks.size(), 2u);
  const Rank& a = p.stages[0].ranks[0];
  const Rank& b = p.stages[0].ranks[1];
  // Heads in whole GQA groups of 4, the faster node gets at least as many.
  EXPECT_EQ(a.head_begin, 0);
  EXPECT_EQ(a.head_end, b.head_begin);
  EXPECT_EQ(a.head_end % 4, 0);
  EXPECT_GE(a.head_end - a.head_begin, b.head_end - b.head_begin);
  EXPECT_TRUE(p.stages[0].shared_kv_heads.empty());
  // FFN rows in whole Q4_K blocks of ffn_down's columns.
  EXPECT_EQ(a.ff_end % 256, 0);
  EXPECT_TRUE(a.embedding);
  EXPECT_FALSE(b.embedding);
}

TEST(Planner, AutoUsesPipelineOnUnevenNodes) {
  const Plan p =
      checked_plan(llama(32), {node("local", 16, 100), node("b", 16, 40)}, PlanOptions{});
  EXPECT_EQ(p.parallel, "pipeline");
}

TEST(Planner, ThreeUnevenNodesGetLayersByBandwidth) {
  const PlanModel m = llama(28);
  const Plan p = checked_plan(m, {node("local", 32, 100), node("b", 32, 50), node("c", 32, 25)},
                              options(PlanOptions::Mode::kPipeline));
  ASSERT_EQ(p.stages.size(), 3u);
  // About 4 : 2 : 1.
  EXPECT_NEAR(layers_of(p.stages[0]), 16, 1);
  EXPECT_NEAR(layers_of(p.stages[1]), 8, 1);
  EXPECT_NEAR(layers_of(p.stages[2]), 4, 1);
}

TEST(Planner, MemoryCapsTheFastestNode) {
  const PlanModel m = llama(32);
  // The fast node can hold only about a quarter of the model.
  const double quarter = static_cast<double>(m.weight_bytes()) / kGiB / 4;
  const Plan p = checked_plan(m, {node("local", quarter + 0.4, 200), node("b", 32, 20)},
                              options(PlanOptions::Mode::kPipeline));
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_LE(layers_of(p.stages[0]), 9);
  EXPECT_GE(layers_of(p.stages[0]), 5);
}

TEST(Planner, SixteenNodes) {
  const PlanModel m = llama(80);
  std::vector<NodeProfile> nodes;
  for (int i = 0; i < 16; ++i)
    nodes.push_back(node(i == 0 ? "local" : "n" + std::to_string(i), 8, 60));
  const Plan p = checked_plan(m, nodes, options(PlanOptions::Mode::kPipeline));
  ASSERT_EQ(p.stages.size(), 16u);
  for (const Stage& s : p.stages) EXPECT_NEAR(layers_of(s), 5, 1);
  // Auto with 16 similar nodes: too many for one tensor group, so a pipeline.
  EXPECT_EQ(checked_plan(m, nodes, PlanOptions{}).parallel, "pipeline");
}

TEST(Planner, NodeWithTooLittleMemoryIsLeftOut) {
  const PlanModel m = llama(32);
  const Plan p = checked_plan(m, {node("local", 16, 50), node("tiny", 0.1, 50), node("c", 16, 50)},
                              options(PlanOptions::Mode::kPipeline));
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].ranks[0].node, 0);
  EXPECT_EQ(p.stages[1].ranks[0].node, 2);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("'tiny' left out: too little memory"), std::string::npos) << p.notes[0];
}

TEST(Planner, ModelThatDoesNotFitIsRefusedWithTheNumbers) {
  const PlanModel m = llama(32);
  PlanOptions o;
  o.n_ctx = 4096;
  const std::string e = error_of(m, {node("local", 1, 50), node("b", 2, 50)}, o);
  // 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 4096 positions = 512 MiB.
  EXPECT_NE(e.find("[plan] the model needs "), std::string::npos) << e;
  EXPECT_NE(e.find("KV cache 512.0 MiB for 4096 positions x 1 sequences"), std::string::npos) << e;
  EXPECT_NE(e.find("weights " + memory_text(m.weight_bytes())), std::string::npos) << e;
  EXPECT_NE(e.find("but the nodes offer " + memory_text(static_cast<uint64_t>(0.9 * kGiB) +
                                                        static_cast<uint64_t>(0.9 * 2 * kGiB))),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("'local' 921.6 MiB, 'b' 1.80 GiB"), std::string::npos) << e;
}

TEST(Planner, EnoughMemoryInTotalButNoSplitFits) {
  const PlanModel m = llama(4);
  // Six nodes hold more than the model together (about 0.65 GiB with its KV cache and
  // scratch), but none holds one of its layers (about 0.15 GiB) with its scratch.
  std::vector<NodeProfile> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(node("n" + std::to_string(i), 0.16, 50));
  const std::string e = error_of(m, nodes, options(PlanOptions::Mode::kPipeline));
  EXPECT_NE(e.find("but no pipeline split of its 4 layers fits every node"), std::string::npos)
      << e;
}

TEST(Planner, NoLocalLeavesTheCoordinatorEmpty) {
  const PlanModel m = llama(32);
  PlanOptions o = options(PlanOptions::Mode::kPipeline);
  o.use_local = false;
  const Plan p = checked_plan(m, {node("local", 64, 500), node("b", 16, 50), node("c", 16, 50)}, o);
  for (const Stage& s : p.stages) {
    for (const Rank& r : s.ranks) EXPECT_NE(r.node, 0);
  }
  EXPECT_NE(p.notes[0].find("--no-local"), std::string::npos);
  EXPECT_NE(error_of(m, {node("local", 64, 50)}, o).find("no node to run the model on"),
            std::string::npos);
}

TEST(Planner, HybridTwoByTwo) {
  const PlanModel m = llama(32);
  PlanOptions o;
  parse_parallel("pipeline:2,tensor:2", o);
  const Plan p = checked_plan(m,
                              {node("local", 8, 50), node("b", 8, 50), node("c", 8, 50),
                               node("d", 8, 50), node("e", 8, 50)},
                              o);
  EXPECT_EQ(p.parallel, "pipeline+tensor");
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].ranks.size(), 2u);
  EXPECT_EQ(p.stages[1].ranks.size(), 2u);
  EXPECT_EQ(p.stages[1].ranks[0].node, 2);
  EXPECT_NE(p.notes.back().find("'e' left out"), std::string::npos);
  parse_parallel("pipeline:3,tensor:2", o);
  EXPECT_NE(error_of(m, {node("local", 8, 50), node("b", 8, 50)}, o)
                .find("needs 6 nodes but only 2 nodes can hold layers"),
            std::string::npos);
}

TEST(Planner, MoreRanksThanKvHeadsShareKvHeads) {
  const PlanModel m = llama(8, 32, 2);
  const Plan p = checked_plan(m, {node("local", 8, 50), node("b", 8, 50), node("c", 8, 50)},
                              options(PlanOptions::Mode::kTensor));
  const Stage& s = p.stages[0];
  ASSERT_EQ(s.ranks.size(), 3u);
  // 32 heads in groups of 16 per KV head, cut in three: the middle rank reads both.
  EXPECT_EQ(s.ranks[1].kv_head_begin, 0);
  EXPECT_EQ(s.ranks[1].kv_head_end, 2);
  EXPECT_EQ(s.shared_kv_heads, (std::vector<int64_t>{0, 1}));
}

TEST(Planner, AnyRankCount) {
  const PlanModel m = llama(8);
  for (int ranks : {3, 5, 6, 7}) {
    std::vector<NodeProfile> nodes;
    for (int i = 0; i < ranks; ++i) nodes.push_back(node("n" + std::to_string(i), 8, 30 + 10 * i));
    const Plan p = checked_plan(m, nodes, options(PlanOptions::Mode::kTensor));
    ASSERT_EQ(p.stages[0].ranks.size(), static_cast<size_t>(ranks));
    // Faster nodes (later ones) get at least as many FFN rows.
    const Rank& first = p.stages[0].ranks.front();
    const Rank& last = p.stages[0].ranks.back();
    EXPECT_LE(first.ff_end - first.ff_begin, last.ff_end - last.ff_begin);
  }
}

TEST(Planner, TensorSharesFollowMemoryWhenTight) {
  const PlanModel m = llama(32);
  const double model_gib = static_cast<double>(m.weight_bytes()) / kGiB;
  // Equal speed, but b holds only about a third of the model.
  const Plan p = checked_plan(m, {node("local", 16, 50), node("b", model_gib / 3 + 0.5, 50)},
                              options(PlanOptions::Mode::kTensor));
  const Rank& b = p.stages[0].ranks[1];
  EXPECT_LT(b.ff_end - b.ff_begin, m.n_ff / 2);
}

TEST(Planner, MixtureOfExperts) {
  const PlanModel m = qwen3moe(8, 16);
  const std::vector<NodeProfile> nodes = {node("local", 8, 50), node("b", 8, 50), node("c", 8, 50),
                                          node("d", 8, 50)};
  const Plan ep = checked_plan(m, nodes, options(PlanOptions::Mode::kTensor));
  EXPECT_EQ(ep.moe, "expert-parallel");
  for (const Rank& r : ep.stages[0].ranks) {
    EXPECT_EQ(r.experts.size(), 4u);
    EXPECT_EQ(r.ff_end - r.ff_begin, 768);
  }
  PlanOptions split = options(PlanOptions::Mode::kTensor);
  split.moe = PlanOptions::MoeMode::kSplitExperts;
  const Plan sp = checked_plan(m, nodes, split);
  EXPECT_EQ(sp.moe, "split-experts");
  // 768 rows per expert are three whole Q4_K blocks of ffn_down_exps' columns: one of the
  // four ranks gets none.
  int64_t with_rows = 0;
  for (const Rank& r : sp.stages[0].ranks) {
    EXPECT_EQ(r.experts.size(), 16u);
    EXPECT_TRUE(r.ff_end - r.ff_begin == 256 || r.ff_end == r.ff_begin);
    with_rows += r.ff_end > r.ff_begin;
  }
  EXPECT_EQ(with_rows, 3);
}

TEST(Planner, Deterministic) {
  const PlanModel m = llama(32);
  const std::vector<NodeProfile> nodes = {node("local", 16, 50), node("b", 6, 50),
                                          node("c", 9, 70)};
  EXPECT_EQ(to_json(plan(m, nodes, PlanOptions{})).dump(),
            to_json(plan(m, nodes, PlanOptions{})).dump());
}

TEST(Planner, TableShowsEveryRank) {
  const PlanModel m = llama(32);
  const std::vector<NodeProfile> nodes = {node("local", 16, 50), node("b", 16, 50)};
  const PlanOptions o = options(PlanOptions::Mode::kTensor);
  const std::string table = plan_table(plan(m, nodes, o), m, nodes, o);
  EXPECT_NE(table.find("plan: tensor, 1 stage, context 4096 x 1 sequence"), std::string::npos)
      << table;
  EXPECT_NE(table.find("b:7000"), std::string::npos) << table;
  EXPECT_NE(table.find("[0,32) E H"), std::string::npos) << table;
}

TEST(Planner, BadInputIsAnError) {
  PlanModel m = llama(4);
  EXPECT_NE(error_of(m, {}, PlanOptions{}).find("no nodes"), std::string::npos);
  EXPECT_NE(error_of(m, {node("local", 8, 0)}, PlanOptions{}).find("bandwidth_gbs"),
            std::string::npos);
  m.n_head_kv = 3;
  EXPECT_NE(error_of(m, {node("local", 8, 50)}, PlanOptions{}).find("multiple of n_head_kv"),
            std::string::npos);
}

TEST(ParseParallel, AcceptsTheDocumentedForms) {
  PlanOptions o;
  parse_parallel("pipeline", o);
  EXPECT_EQ(o.mode, PlanOptions::Mode::kPipeline);
  parse_parallel("tensor", o);
  EXPECT_EQ(o.mode, PlanOptions::Mode::kTensor);
  parse_parallel("pipeline:3,tensor:2", o);
  EXPECT_EQ(o.mode, PlanOptions::Mode::kHybrid);
  EXPECT_EQ(o.pipeline_stages, 3);
  EXPECT_EQ(o.tensor_ranks, 2);
  parse_parallel("tensor:4", o);
  EXPECT_EQ(o.pipeline_stages, 1);
  EXPECT_EQ(o.tensor_ranks, 4);
  parse_parallel("auto", o);
  EXPECT_EQ(o.mode, PlanOptions::Mode::kAuto);
  for (const char* bad :
       {"", "pipe", "pipeline:0", "pipeline:x", "tensor:2,tensor:2", "pipeline:2,"}) {
    EXPECT_THROW(parse_parallel(bad, o), Error) << bad;
  }
}

TEST(Apportion, SharesFollowSpeedUnderCaps) {
  const auto f = share_by_speed({1, 1, 2}, {1, 0.1, 1});
  ASSERT_TRUE(f);
  EXPECT_DOUBLE_EQ((*f)[1], 0.1);
  EXPECT_DOUBLE_EQ((*f)[0], 0.3);
  EXPECT_DOUBLE_EQ((*f)[2], 0.6);
  EXPECT_FALSE(share_by_speed({1, 1}, {0.4, 0.5}));
  const std::vector<int64_t> b = split_ranges(100, 1, {1.0 / 3, 1.0 / 3, 1.0 / 3});
  EXPECT_EQ(b, (std::vector<int64_t>{0, 33, 67, 100}));
  EXPECT_EQ(split_ranges(1024, 256, {0.3, 0.3, 0.4}), (std::vector<int64_t>{0, 256, 512, 1024}));
}

TEST(NodeProfileJson, RoundTripAndErrorsNameTheField) {
  const NodeProfile a = node("a", 8, 50);
  EXPECT_EQ(node_profiles_from_text(to_json(a).dump(), "a.json"), std::vector<NodeProfile>{a});
  const nlohmann::json both = nlohmann::json::array({to_json(a), to_json(node("b", 4, 20))});
  EXPECT_EQ(node_profiles_from_text(both.dump(), "x").size(), 2u);
  nlohmann::json bad = to_json(a);
  bad["bandwidth_gbs"] = "fast";
  try {
    node_profiles_from_text(bad.dump(), "a.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[plan] node profile 'a.json': field 'bandwidth_gbs' is not a number");
  }
  bad = to_json(a);
  bad.erase("free_memory_bytes");
  EXPECT_THROW(node_profiles_from_text(bad.dump(), "a.json"), Error);
  EXPECT_THROW(node_profiles_from_text("{", "a.json"), Error);
}

TEST(PlanJson, ErrorsNameTheField) {
  const PlanModel m = llama(4);
  const std::vector<NodeProfile> nodes = {node("local", 8, 50), node("b", 8, 50)};
  nlohmann::json j = to_json(plan(m, nodes, PlanOptions{}));
  j["stages"][0]["ranks"][1]["heads"] = {5, 2};
  try {
    plan_from_json(j);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "[plan] plan.stages[0].ranks[1]: field 'heads' is not a range with 0 <= begin <= end");
  }
}

TEST(PlanCheck, CatchesABrokenPlan) {
  const PlanModel m = llama(8);
  const std::vector<NodeProfile> nodes = {node("local", 8, 50), node("b", 8, 50)};
  const PlanOptions o = options(PlanOptions::Mode::kTensor);
  Plan p = plan(m, nodes, o);
  p.stages[0].ranks[1].head_begin += 4;  // heads 16..19 now unowned
  EXPECT_THROW(check_plan(p, m, nodes, o), Error);
  p = plan(m, nodes, options(PlanOptions::Mode::kPipeline));
  p.stages.back().layer_end -= 1;  // the last layer dropped
  EXPECT_THROW(check_plan(p, m, nodes, o), Error);
}

// DeepSeek V3's attention: 128 heads over one latent of 512 and a rope key of 64 per token.
PlanModel deepseek_v3(int64_t n_layer) {
  HParams hp;
  hp.n_vocab = 129280;
  hp.n_embd = 7168;
  hp.n_ff = 18432;
  hp.n_layer = n_layer;
  hp.n_head = 128;
  hp.n_head_kv = 1;
  hp.head_dim = 192;
  hp.head_dim_v = 128;
  hp.n_rot = 64;
  hp.n_ctx = 4096;
  hp.q_lora_rank = 1536;
  hp.kv_lora_rank = 512;
  hp.mla_split_b = true;
  hp.n_expert = 16;
  hp.n_expert_used = 8;
  hp.n_ff_expert = 2048;
  hp.n_expert_shared = 1;
  hp.n_leading_dense = 1;
  hp.gating = Gating::kSigmoid;
  return synthetic_plan_model(*find_arch("deepseek2"), hp, TensorType::Q4_K);
}

TEST(Planner, MlaRanksEachCountTheWholeLatentCache) {
  // The cache holds one latent and one rope key per token, which every query head reads:
  // each tensor-parallel rank keeps all of it, F16, however few heads it has.
  const PlanModel m = deepseek_v3(4);
  PlanOptions o = options(PlanOptions::Mode::kTensor);
  o.n_ctx = 1024;
  const std::vector<NodeProfile> nodes = {node("local", 64, 50), node("b", 64, 30),
                                          node("c", 64, 40)};
  const Plan p = checked_plan(m, nodes, o);
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].ranks.size(), 3u);
  const uint64_t per_rank = uint64_t{4} * 1024 * (512 + 64) * 2;
  for (const Rank& r : p.stages[0].ranks) {
    EXPECT_EQ(r.kv_head_end - r.kv_head_begin, 1);
    EXPECT_EQ(estimate_memory(m, o, rank_load(m, p.stages[0], r)).kv_cache, per_rank);
  }
  // Pipeline stages: each its own layers' latents.
  const Plan pp = checked_plan(m, nodes, options(PlanOptions::Mode::kPipeline));
  uint64_t total = 0;
  for (const Stage& s : pp.stages) {
    total += estimate_memory(m, PlanOptions{}, rank_load(m, s, s.ranks[0])).kv_cache;
  }
  EXPECT_EQ(total, uint64_t{4} * static_cast<uint64_t>(pp.n_ctx) * (512 + 64) * 2);
}

TEST(PlanModelFrom, MlaCacheIsWhatTheShardAllocates) {
  // The frontier deepseek2 file: 3 layers, kv_lora 64 + rope 16, context 256. The planner's
  // KV bytes of every rank (2 and 3 ranks, both MoE modes) are those the rank's shard
  // allocates, and layers x n_ctx x (kv_lora + rope) x 2 bytes.
  const gguf::File f = gguf::File::open("../shared/models/frontier/deepseek2-f32.gguf");
  const ModelInfo info = read_model_info(f);
  ASSERT_EQ(info.hp.kv_lora_rank + info.hp.n_rot, 80);
  const PlanModel m = plan_model_from(info, f);
  for (const PlanOptions::MoeMode moe :
       {PlanOptions::MoeMode::kExpertParallel, PlanOptions::MoeMode::kSplitExperts}) {
    for (size_t n = 2; n <= 3; ++n) {
      std::vector<NodeProfile> nodes = {node("local", 1, 10), node("b", 1, 30), node("c", 1, 20)};
      nodes.resize(n);
      PlanOptions o = options(PlanOptions::Mode::kTensor);
      o.moe = moe;
      o.n_ctx = 256;
      const Plan p = checked_plan(m, nodes, o);
      ASSERT_EQ(p.stages.size(), 1u);
      ASSERT_EQ(p.stages[0].ranks.size(), n);
      for (const Rank& r : p.stages[0].ranks) {
        const uint64_t kv = estimate_memory(m, o, rank_load(m, p.stages[0], r)).kv_cache;
        EXPECT_EQ(kv, uint64_t{3} * 256 * 80 * 2);
        engine::ShardOptions so;
        so.n_ctx = o.n_ctx;
        so.n_seq = o.n_seq;
        EXPECT_EQ(kv, engine::Shard::sizes(info, shard_spec(p.stages[0], r, true), so).kv_bytes);
      }
    }
  }
}

TEST(PlanModelFrom, CompressedCacheIsWhatTheShardAllocates) {
  // frontier2's deepseek4: each pipeline stage counts the window rows, compressor rings and
  // entries of its own layers (they differ by layer: 0, 4, 128, 4), as its shard allocates
  // them, far less than a row per position; tensor parallelism is refused, auto pipelines.
  const gguf::File f = gguf::File::open("../shared/models/frontier2/deepseek4-f32.gguf");
  const ModelInfo info = read_model_info(f);
  const PlanModel m = plan_model_from(info, f);
  const std::vector<NodeProfile> nodes = {node("local", 1, 10), node("b", 1, 10)};
  PlanOptions o = options(PlanOptions::Mode::kPipeline);
  o.n_ctx = 256;
  const Plan p = checked_plan(m, nodes, o);
  ASSERT_EQ(p.stages.size(), 2u);
  uint64_t total = 0;
  for (const Stage& s : p.stages) {
    const uint64_t kv = estimate_memory(m, o, rank_load(m, s, s.ranks[0])).kv_cache;
    engine::ShardOptions so;
    so.n_ctx = o.n_ctx;
    so.n_seq = o.n_seq;
    EXPECT_EQ(kv, engine::Shard::sizes(info, shard_spec(s, s.ranks[0], true), so).kv_bytes);
    EXPECT_GT(kv, 0u);
    total += kv;
  }
  EXPECT_LT(total, uint64_t{4} * 256 * 64 * 2);  // one F16 latent per position and layer
  EXPECT_THROW(plan(m, nodes, options(PlanOptions::Mode::kTensor)), Error);
  EXPECT_EQ(checked_plan(m, nodes, options(PlanOptions::Mode::kAuto)).stages.size(), 2u);
}

TEST(PlanModelFrom, Gemma4CachesAreEachLayersOwnAndStagesKeepSharedKv) {
  // gemma4: sliding layers 0-2 cache 2 KV heads of 32, the global layer 3 one of 64;
  // gemma4e: 1 KV head of 32 / 64, and layers 3-5 read the caches of layers 1 and 2 (none
  // of their own), so no stage may start at layers 2-5.
  for (const char* name : {"gemma4-q8_0", "gemma4e-q8_0"}) {
    SCOPED_TRACE(name);
    const gguf::File f =
        gguf::File::open(std::string("../shared/models/frontier2/") + name + ".gguf");
    const ModelInfo info = read_model_info(f);
    const PlanModel m = plan_model_from(info, f);
    const bool e = info.hp.n_embd_per_layer > 0;
    uint64_t per_position = 0;
    for (const PlanLayer& l : m.layers) per_position += l.kv_cache_bytes;
    EXPECT_EQ(per_position, e ? uint64_t{2} * (32 + 32 + 64) * 2 : (uint64_t{3} * 64 + 64) * 2 * 2);
    for (int64_t il = 2; il < 6; ++il) EXPECT_EQ(m.can_start_stage(il), !e) << il;
    PlanOptions o = options(PlanOptions::Mode::kPipeline);
    o.n_ctx = 256;
    const Plan p = checked_plan(m, {node("local", 1, 10), node("b", 1, 10), node("c", 1, 10)}, o);
    EXPECT_GE(p.stages.size(), 2u);
    for (const Stage& s : p.stages) {
      EXPECT_TRUE(m.can_start_stage(s.layer_begin)) << s.layer_begin;
      const uint64_t kv = estimate_memory(m, o, rank_load(m, s, s.ranks[0])).kv_cache;
      engine::ShardOptions so;
      so.n_ctx = o.n_ctx;
      so.n_seq = o.n_seq;
      EXPECT_EQ(kv, engine::Shard::sizes(info, shard_spec(s, s.ranks[0], true), so).kv_bytes);
    }
    const std::string refused =
        error_of(m, {node("local", 1, 10), node("b", 1, 10)}, options(PlanOptions::Mode::kTensor));
    EXPECT_NE(refused.find("tensor parallelism is not supported for gemma4"), std::string::npos)
        << refused;
  }
}

TEST(PlanModelFrom, MatchesTheFile) {
  for (const char* name : {"llama-q4_0", "qwen3moe-f16", "llama3r-f32"}) {
    const gguf::File f = gguf::File::open(std::string("../shared/models/") + name + ".gguf");
    const ModelInfo info = read_model_info(f);
    const PlanModel m = plan_model_from(info, f);
    const uint64_t rope = info.has_rope_freqs ? f.tensor("rope_freqs.weight").n_bytes : 0;
    EXPECT_EQ(m.weight_bytes(), info.weight_bytes + rope) << name;
    EXPECT_EQ(m.n_layer, 2) << name;
    EXPECT_GT(m.layers[1].attn_q_bytes, 0u) << name;
    EXPECT_GT(m.layers[1].ffn_bytes, m.layers[1].replicated_bytes) << name;
    checked_plan(m, {node("local", 1, 10), node("b", 1, 10), node("c", 1, 10)},
                 options(PlanOptions::Mode::kTensor));
  }
}

}  // namespace
}  // namespace herd
