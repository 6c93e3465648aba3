// The coordinator and node daemons in one process, over real TCP on 127.0.0.1: a model
// split into pipeline stages gives the same logits, bit for bit, as one process; weights
// are shipped to nodes without the file and cached; failures are reported, not hung on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include <unistd.h>

#include "cluster/assignment.h"
#include "cluster/cluster_runner.h"
#include "cluster/node.h"
#include "cluster/peers.h"
#include "cluster/test_node.h"
#include "cluster/weight_cache.h"
#include "engine/test_sequence.h"
#include "gguf/split.h"
#include "net/tcp_transport.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ClusterOptions pipeline_options(std::vector<std::string> peers) {
  ClusterOptions o;
  o.peers = std::move(peers);
  o.plan.mode = PlanOptions::Mode::kPipeline;
  o.local.threads = 1;
  o.local.n_ctx = 64;
  o.local_bandwidth_gbs = 10;  // as fast as the test nodes: every node gets a stage
  return o;
}

std::vector<int32_t> prompt_ids() {
  return {1, 15, 27, 3, 99, 42, 7, 64, 12, 5, 33, 80};
}

// Logits of every position, prefill in chunks of 5 then one token at a time.
std::vector<float> run_all(engine::ModelRunner& runner, const std::vector<int32_t>& ids) {
  std::vector<float> out = engine::forward_sequence(runner, std::span(ids).first(8), 0, 5, true);
  for (size_t p = 8; p < ids.size(); ++p) {
    engine::Batch b;
    b.add(ids[p], 0, static_cast<int32_t>(p), true);
    std::vector<float> logits;
    runner.forward(b, logits);
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

class PipelineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineTest, MatchesOneProcessBitForBit) {
  const std::string model = "../shared/models/" + GetParam() + ".gguf";
  std::string name = GetParam();  // "frontier2/glm4moe-f32": one directory, not two
  std::replace(name.begin(), name.end(), '/', '-');
  const TempDir cache("cluster-test", "pipeline-" + name);
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), prompt_ids());

  TestNode a("node-a", cache), b("node-b", cache);
  auto cluster = ClusterRunner::open(model, pipeline_options({a.address(), b.address()}));
  ASSERT_GE(cluster->plan().stages.size(), 2u) << cluster->describe();
  std::vector<float> got = run_all(*cluster, prompt_ids());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
      << cluster->describe();
  int64_t tokens = 0;
  for (const StageStats& s : cluster->stage_stats()) tokens += s.tokens;
  EXPECT_EQ(tokens, static_cast<int64_t>(prompt_ids().size() * cluster->plan().stages.size()));
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineTest,
                         ::testing::Values("llama-q4_0", "llama-q4_k_m", "qwen2-f16", "qwen3-f16",
                                           "qwen3moe-f16", "llama3r-f16", "frontier2/glm4moe-f32",
                                           "frontier2/glm4moe-q8_0", "frontier2/gemma4-q8_0",
                                           "frontier2/gemma4e-q8_0"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// Gemma 4 E2B style: every stage computes its layers' per-layer inputs from the token ids,
// so a node without the file is shipped token_embd and per_layer_* beside its layers; the
// shared-KV layers stay in the stage of the layers whose cache they read.
TEST(ClusterTest, PerLayerInputsAreShippedToEveryStage) {
  const std::string model = "../shared/models/frontier2/gemma4e-q8_0.gguf";
  const TempDir cache("cluster-test", "pipeline-gemma4e-shipped");
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), prompt_ids());
  TestNode a("node-a", cache, false), b("node-b", cache, false);
  ClusterOptions o = pipeline_options({a.address(), b.address()});
  o.plan.use_local = false;
  auto cluster = ClusterRunner::open(model, o);
  ASSERT_GE(cluster->plan().stages.size(), 2u) << cluster->describe();
  for (const Stage& stage : cluster->plan().stages) {
    // Layers 3-5 read the caches of layers 1 and 2.
    EXPECT_TRUE(stage.layer_begin <= 1 || stage.layer_begin >= 6) << cluster->describe();
  }
  std::vector<float> got = run_all(*cluster, prompt_ids());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
      << cluster->describe();
}

// Largest |a - b| over the range of the reference logits, per position.
double max_relative_error(const std::vector<float>& got, const std::vector<float>& want,
                          int64_t n_vocab) {
  double worst = 0;
  for (size_t row = 0; row * n_vocab < want.size(); ++row) {
    const float* w = want.data() + row * n_vocab;
    const float* g = got.data() + row * n_vocab;
    const auto [lo, hi] = std::minmax_element(w, w + n_vocab);
    double err = 0;
    for (int64_t i = 0; i < n_vocab; ++i) err = std::max(err, std::abs(double(g[i]) - w[i]));
    worst = std::max(worst, err / std::max(1e-6, double(*hi - *lo)));
  }
  return worst;
}

std::vector<int32_t> argmaxes(const std::vector<float>& logits, int64_t n_vocab) {
  std::vector<int32_t> out;
  for (size_t row = 0; row * n_vocab < logits.size(); ++row) {
    const float* r = logits.data() + row * n_vocab;
    out.push_back(static_cast<int32_t>(std::max_element(r, r + n_vocab) - r));
  }
  return out;
}

struct TensorCase {
  std::string model;
  std::string parallel;  // --parallel
  int nodes;             // node daemons besides this process
  bool use_local;
};

class TensorParallelTest : public ::testing::TestWithParam<TensorCase> {};

TEST_P(TensorParallelTest, MatchesOneProcess) {
  const TensorCase& c = GetParam();
  const std::string model = "../shared/models/" + c.model + ".gguf";
  const TempDir cache("cluster-test", "tensor");
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  auto local = engine::LocalRunner::open(model, lo);
  const int64_t n_vocab = local->hparams().n_vocab;
  std::vector<float> expected = run_all(*local, prompt_ids());

  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<std::string> peers;
  for (int i = 0; i < c.nodes; ++i) {
    nodes.push_back(std::make_unique<TestNode>("node-" + std::to_string(i), cache,
                                               /*use_model_files=*/i % 2 == 0));
    peers.push_back(nodes.back()->address());
  }
  ClusterOptions o = pipeline_options(peers);
  parse_parallel(c.parallel, o.plan);
  o.plan.use_local = c.use_local;
  auto cluster = ClusterRunner::open(model, o);
  size_t max_ranks = 0;
  for (const Stage& s : cluster->plan().stages) max_ranks = std::max(max_ranks, s.ranks.size());
  ASSERT_GE(max_ranks, 2u) << cluster->describe();
  std::vector<float> got = run_all(*cluster, prompt_ids());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_LT(max_relative_error(got, expected, n_vocab), 1e-3) << cluster->describe();
  EXPECT_EQ(argmaxes(got, n_vocab), argmaxes(expected, n_vocab)) << cluster->describe();
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, TensorParallelTest,
    ::testing::Values(TensorCase{"llama-q4_0", "tensor", 1, true},
                      TensorCase{"llama-q4_0", "tensor", 2, false},
                      TensorCase{"qwen2-f16", "tensor", 2, true},  // 3 ranks > 2 KV heads
                      TensorCase{"qwen3-f16", "tensor", 3, false},
                      TensorCase{"qwen3moe-f16", "tensor", 2, false},
                      TensorCase{"frontier2/glm4moe-f32", "tensor", 2, false},
                      TensorCase{"frontier2/minimax-m2-f32", "tensor", 2, true},
                      TensorCase{"llama-q4_k_m", "pipeline:2,tensor:2", 3, true},
                      // Two tensor-parallel stages on nodes: rank 0 of the first sends its
                      // hidden states straight to both ranks of the second.
                      TensorCase{"llama-q4_k_m", "pipeline:2,tensor:2", 4, false}),
    [](const auto& info) {
      std::string name = info.param.model + "_" + std::to_string(info.param.nodes) + "nodes" +
                         (info.param.use_local ? "_local" : "") +
                         (info.param.parallel == "tensor" ? "" : "_hybrid");
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(ClusterTest, NoLocalRunsEveryStageOnNodes) {
  const std::string model = "../shared/models/llama-q8_0.gguf";
  const TempDir cache("cluster-test", "nolocal");
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), prompt_ids());
  TestNode a("node-a", cache), b("node-b", cache);
  ClusterOptions o = pipeline_options({a.address(), b.address()});
  o.plan.use_local = false;
  auto cluster = ClusterRunner::open(model, o);
  for (const Stage& s : cluster->plan().stages) EXPECT_NE(s.ranks[0].node, 0);
  std::vector<float> got = run_all(*cluster, prompt_ids());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  // The stages talk directly: the coordinator sends to the first and hears from the last,
  // and still knows each stage's compute time.
  const std::vector<StageStats> stats = cluster->stage_stats();
  ASSERT_EQ(stats.size(), 2u) << cluster->describe();
  EXPECT_GT(stats[0].bytes_sent, 0u);
  EXPECT_EQ(stats[0].bytes_received, 0u);
  EXPECT_EQ(stats[1].bytes_sent, 0u);
  EXPECT_GT(stats[1].bytes_received, 0u);
  EXPECT_EQ(stats[0].link_bytes_received, 0u);
  EXPECT_GT(stats[1].link_bytes_received, 0u);
  for (const StageStats& s : stats) {
    EXPECT_GT(s.compute_seconds, 0) << s.node;
    EXPECT_GE(s.busy_seconds, s.compute_seconds) << s.node;
    EXPECT_EQ(s.tokens, static_cast<int64_t>(prompt_ids().size())) << s.node;
  }
  EXPECT_THAT(a.log() + b.log(), HasSubstr("input from the previous stage"));
  EXPECT_THAT(a.log() + b.log(), HasSubstr("output to the next stage"));
}

TEST(ClusterTest, ALostStageOfAChainIsRecovered) {
  // Two stages on nodes pass activations straight on; either one stopping is noticed (the
  // coordinator waits on the last stage and watches the first), the pod is formed again
  // on the survivor, which says its states are lost; the sequence run again, the answer is
  // the one one process gives.
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "chain-gone");
  engine::Batch prompt;
  for (int32_t i = 0; i < 5; ++i) prompt.add(10 + i, 0, i, i == 4);
  engine::Batch next;
  next.add(99, 0, 5, true);
  engine::LocalOptions lo;
  lo.n_ctx = 64;
  auto local = engine::LocalRunner::open(model, lo);
  std::vector<float> expected;
  local->forward(prompt, expected);
  local->forward(next, expected);
  for (int victim = 0; victim < 2; ++victim) {
    auto a = std::make_unique<TestNode>("node-a", cache);
    auto b = std::make_unique<TestNode>("node-b", cache);
    ClusterOptions o = pipeline_options({a->address(), b->address()});
    o.plan.use_local = false;
    auto cluster = ClusterRunner::open(model, o);
    ASSERT_EQ(cluster->plan().stages.size(), 2u) << cluster->describe();
    std::vector<float> logits;
    cluster->forward(prompt, logits);
    const int node = cluster->plan().stages[static_cast<size_t>(victim)].ranks[0].node;
    const std::string name = node == 1 ? "node-a" : "node-b";
    (node == 1 ? a : b)->stop();
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(cluster->forward(next, logits), engine::StatesLost);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    cluster->forward(prompt, logits);  // the scheduler's part: the sequence again
    cluster->forward(next, logits);
    EXPECT_EQ(cluster->plan().stages.size(), 1u) << cluster->describe();
    EXPECT_THAT(cluster->cluster_json().dump(), HasSubstr(name)) << "stage " << victim;
    EXPECT_EQ(logits, expected) << "stage " << victim;
  }
}

TEST(ClusterTest, ShipsWeightsOnceThenUsesTheCache) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "ship");
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), prompt_ids());
  TestNode node("node-a", cache, /*use_model_files=*/false);
  ClusterOptions o = pipeline_options({node.address()});
  {
    auto cluster = ClusterRunner::open(model, o);
    std::vector<float> got = run_all(*cluster, prompt_ids());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  }
  EXPECT_THAT(node.log(), HasSubstr("from the coordinator"));
  size_t cached = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache / "models")) {
    cached += e.path().extension() == ".gguf";
  }
  EXPECT_EQ(cached, 1u);
  {
    auto cluster = ClusterRunner::open(model, o);
    std::vector<float> got = run_all(*cluster, prompt_ids());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  }
  EXPECT_THAT(node.log(), HasSubstr("from the cache"));
}

// A split model on a pod: one node maps the coordinator's files (its set found from the
// first file, known by the hash of all of them), the other is sent its tensors from them;
// the logits are the one file's, bit for bit.
TEST(ClusterTest, ASplitModelRunsOnAPodAsTheOneFile) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir dir("cluster-test", "split");
  const std::vector<std::string> paths =
      gguf::write_split(gguf::File::open(model), (dir / "llama-q4_0").string(), 3);
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  const std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), prompt_ids());
  TestNode files("node-files", dir / "cache-files");
  TestNode wire("node-wire", dir / "cache-wire", /*use_model_files=*/false);
  ClusterOptions o = pipeline_options({files.address(), wire.address()});
  o.plan.use_local = false;
  auto cluster = ClusterRunner::open(paths[0], o);
  ASSERT_EQ(cluster->plan().stages.size(), 2u) << cluster->describe();
  const std::vector<float> got = run_all(*cluster, prompt_ids());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  EXPECT_THAT(files.log(), HasSubstr("from the model file"));
  EXPECT_THAT(wire.log(), HasSubstr("from the coordinator"));
}

// A node that holds the model in its own store, under another path than the coordinator's,
// maps that copy (found by the store name LOAD gives, checked by its hash); the other is
// sent its tensors; the logits are one process's, bit for bit.
TEST(ClusterTest, ANodeMapsItsOwnStoresCopyOfTheModel) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir dir("cluster-test", "own-copy");
  const fs::path own_copy = dir / "store-a/org/repo/Q4_0/llama-q4_0.gguf";
  fs::create_directories(own_copy.parent_path());
  fs::copy_file(model, own_copy);
  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  const std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), prompt_ids());
  TestNode own("node-own", dir / "cache-own", true, store::Store(dir / "store-a", {}));
  TestNode wire("node-wire", dir / "cache-wire", /*use_model_files=*/false);
  ClusterOptions o = pipeline_options({own.address(), wire.address()});
  o.plan.use_local = false;
  o.store_name = net::StoreName{"org/repo", "Q4_0/llama-q4_0.gguf", fs::file_size(model)};
  auto cluster = ClusterRunner::open(model, o);
  ASSERT_EQ(cluster->plan().stages.size(), 2u) << cluster->describe();
  const std::vector<float> got = run_all(*cluster, prompt_ids());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  EXPECT_THAT(own.log(), HasSubstr("from this node's store (" + own_copy.string() + ")"));
  EXPECT_THAT(own.log(), ::testing::Not(HasSubstr("received")));
  EXPECT_THAT(wire.log(), HasSubstr("from the coordinator"));
}

TEST(ClusterTest, ANodeThatCannotLoadIsNamedWithItsErrorOnce) {
  // A cached shard spoiled after it was shipped: the node's load fails, and the coordinator
  // says which node and why, with each module named once (the node's error text already
  // starts with its own "[module]").
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "spoiled");
  TestNode node("node-a", cache, /*use_model_files=*/false);
  ClusterOptions o = pipeline_options({node.address()});
  o.plan.use_local = false;
  ClusterRunner::open(model, o);
  for (const auto& e : fs::recursive_directory_iterator(cache / "models")) {
    if (e.path().extension() == ".gguf") fs::resize_file(e.path(), 16);
  }
  try {
    ClusterRunner::open(model, o);
    FAIL() << "a node with a spoiled cache loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                ::testing::StartsWith("[cluster] node 'node-a' could not load its shard: "));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("[cluster] [cluster]")));
  }
}

TEST(ClusterTest, ASecondCoordinatorIsToldTheNodeIsBusy) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "busy");
  TestNode node("node-a", cache);
  auto first = ClusterRunner::open(model, pipeline_options({node.address()}));
  try {
    ClusterRunner::open(model, pipeline_options({node.address()}));
    FAIL() << "a busy node was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("busy"));
  }
  // The first coordinator is unaffected.
  std::vector<float> logits;
  engine::Batch b;
  b.add(1, 0, 0, true);
  first->forward(b, logits);
  EXPECT_EQ(logits.size(), static_cast<size_t>(first->hparams().n_vocab));
}

TEST(ClusterTest, ANodeThatGoesAwayIsReplacedByThisProcess) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "gone");
  auto node = std::make_unique<TestNode>("node-gone", cache);
  auto cluster = ClusterRunner::open(model, pipeline_options({node->address()}));
  ASSERT_EQ(cluster->plan().stages.size(), 2u);
  engine::Batch prompt;
  for (int32_t i = 0; i < 5; ++i) prompt.add(10 + i, 0, i, i == 4);
  std::vector<float> logits;
  cluster->forward(prompt, logits);
  node.reset();  // the node stops: its connection closes
  engine::Batch next;
  next.add(99, 0, 5, true);
  // A pod of this process alone, formed again: the batch did not run, once.
  EXPECT_THROW(cluster->forward(next, logits), engine::StatesLost);
  EXPECT_EQ(cluster->plan().stages.size(), 1u);
  EXPECT_THAT(cluster->cluster_json()["events"].dump(), HasSubstr("the scheduler runs every"));
  cluster->forward(prompt, logits);  // the sequence again from position 0
  cluster->forward(next, logits);
  const nlohmann::json status = cluster->cluster_json();
  EXPECT_EQ(status["state"], "ok");
  EXPECT_THAT(status.dump(), HasSubstr("node-gone"));
  EXPECT_TRUE(cluster->unavailable().empty());

  // The same tokens in one process give the same logits.
  engine::LocalOptions lo;
  lo.n_ctx = 64;
  auto local = engine::LocalRunner::open(model, lo);
  std::vector<float> expected;
  local->forward(prompt, expected);
  local->forward(next, expected);
  EXPECT_EQ(logits, expected);
}

// Nodes that are shipped their weights: the spare stands by with node-a's; when node-a is
// lost it takes its place, the plan stays, and no node is shipped anything again.
TEST(ClusterTest, ASpareTakesTheLostNodesPlaceWithoutAShipment) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "spare");
  auto a = std::make_unique<TestNode>("node-a", cache / "a", /*use_model_files=*/false);
  TestNode b("node-b", cache / "b", /*use_model_files=*/false);
  TestNode c("node-c", cache / "c", /*use_model_files=*/false);
  ClusterOptions o = pipeline_options({a->address(), b.address(), c.address()});
  o.plan.use_local = false;
  o.spares = 1;
  auto cluster = ClusterRunner::open(model, o);
  ASSERT_EQ(cluster->plan().stages.size(), 2u);
  nlohmann::json status = cluster->cluster_json();
  ASSERT_EQ(status["nodes"].size(), 4u);
  EXPECT_EQ(status["nodes"][3]["name"], "node-c");
  EXPECT_EQ(status["nodes"][3]["state"], "spare");
  EXPECT_EQ(status["nodes"][3]["stands_by"]["node"], "node-a");
  EXPECT_THAT(c.log(), HasSubstr("a spare for stage 0 rank 0, standing by"));
  EXPECT_THAT(c.log(), HasSubstr("from the coordinator"));

  const std::vector<int32_t> ids = prompt_ids();
  std::vector<float> got = engine::forward_sequence(*cluster, std::span(ids).first(8), 0, 5, true);
  a.reset();  // node-a stops: its connection closes
  int lost = 0;
  for (size_t p = 8; p < ids.size(); ++p) {
    engine::Batch next;
    next.add(ids[p], 0, static_cast<int32_t>(p), true);
    std::vector<float> logits;
    try {
      cluster->forward(next, logits);
    } catch (const engine::StatesLost&) {
      // The new pod's slots are empty: the sequence runs again, then the batch.
      ++lost;
      engine::forward_sequence(*cluster, std::span(ids).first(p), 0, 5, false);
      cluster->forward(next, logits);
    }
    got.insert(got.end(), logits.begin(), logits.end());
  }
  EXPECT_EQ(lost, 1);
  status = cluster->cluster_json();
  EXPECT_EQ(status["state"], "ok");
  EXPECT_THAT(status["events"].dump(), HasSubstr("spare 'node-c' in the place of 'node-a'"));
  EXPECT_EQ(cluster->plan().stages.size(), 2u);
  EXPECT_EQ(cluster->nodes()[1].name, "node-c");
  // node-c was shipped stage 0's weights once, as a spare; node-b its own once.
  for (TestNode* node : {&b, &c}) {
    const std::string log = node->log();
    size_t shipped = 0;
    for (size_t at = log.find("from the coordinator"); at != std::string::npos;
         at = log.find("from the coordinator", at + 1)) {
      ++shipped;
    }
    EXPECT_EQ(shipped, 1u) << log;
    EXPECT_THAT(log, HasSubstr("from the cache"));
  }

  engine::LocalOptions lo;
  lo.threads = 1;
  lo.n_ctx = 64;
  const std::vector<float> expected = run_all(*engine::LocalRunner::open(model, lo), ids);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
}

TEST(ClusterTest, TheLinkToEachNodeIsMeasuredAndThePlanPredicted) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "links");
  TestNode node("node-a", cache);
  auto cluster = ClusterRunner::open(model, pipeline_options({node.address()}));
  const nlohmann::json status = cluster->cluster_json();
  const nlohmann::json& link = status["nodes"][1]["link"];
  EXPECT_EQ(link["measured"], true);
  // Loopback: well under a second's round trip, more than a megabit each way.
  EXPECT_GT(link["rtt_ms"].get<double>(), 0);
  EXPECT_LT(link["rtt_ms"].get<double>(), 1000);
  EXPECT_GT(link["send_gbits"].get<double>(), 1e-3);
  EXPECT_GT(link["receive_gbits"].get<double>(), 1e-3);
  const Prediction p = cluster->prediction(256);
  EXPECT_GT(p.decode_tokens_per_s, 0);
  EXPECT_GT(p.decode_wire_seconds, 0);  // two messages a token: to node-a and back
  EXPECT_GT(status["prediction"]["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_TRUE(status["node_links"].empty());  // one node: no link between nodes
}

// Two nodes: each pair is measured too, by one node dialling the other (PEER_PROBE).
TEST(ClusterTest, TheLinkBetweenTwoNodesIsMeasuredByOneOfThem) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "node-links");
  TestNode a("node-a", cache);
  TestNode b("node-b", cache);
  auto cluster = ClusterRunner::open(model, pipeline_options({a.address(), b.address()}));
  const nlohmann::json links = cluster->cluster_json()["node_links"];
  ASSERT_EQ(links.size(), 1u) << cluster->cluster_json().dump();
  EXPECT_EQ(links[0]["from"], "node-a");
  EXPECT_EQ(links[0]["to"], "node-b");
  EXPECT_GT(links[0]["rtt_ms"].get<double>(), 0);
  EXPECT_LT(links[0]["rtt_ms"].get<double>(), 1000);
  EXPECT_GT(links[0]["send_gbits"].get<double>(), 1e-3);
  EXPECT_GT(links[0]["receive_gbits"].get<double>(), 1e-3);
  // The nodes still serve: a batch through both gives logits.
  engine::Batch batch;
  batch.add(1, 0, 0, true);
  std::vector<float> logits;
  cluster->forward(batch, logits);
  EXPECT_FALSE(logits.empty());
}

TEST(ClusterTest, NoSurvivorsFailsTheRequestNamingTheNode) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "alone");
  auto node = std::make_unique<TestNode>("node-gone", cache);
  ClusterOptions o = pipeline_options({node->address()});
  o.plan.use_local = false;
  auto cluster = ClusterRunner::open(model, o);
  node.reset();
  engine::Batch b;
  b.add(1, 0, 0, true);
  std::vector<float> logits;
  const auto start = std::chrono::steady_clock::now();
  try {
    cluster->forward(b, logits);
    FAIL() << "forward succeeded without its node";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node-gone"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THAT(cluster->unavailable(), HasSubstr("node-gone"));
  EXPECT_EQ(cluster->cluster_json()["state"], "degraded");
  // Later requests get the same clear error.
  EXPECT_THROW(cluster->forward(b, logits), Error);
}

TEST(ClusterTest, AFailedBatchIsReportedAndTheSessionGoesOn) {
  const std::string model = "../shared/models/llama-q4_0.gguf";
  const TempDir cache("cluster-test", "badbatch");
  TestNode node("node-a", cache);
  ClusterOptions o = pipeline_options({node.address()});
  o.plan.use_local = false;
  auto cluster = ClusterRunner::open(model, o);
  engine::Batch b;
  b.add(1, 0, 1000, true);  // beyond the context of 64
  std::vector<float> logits;
  try {
    cluster->forward(b, logits);
    FAIL() << "a position beyond the context was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("context full"));
    EXPECT_THAT(e.what(), HasSubstr("node-a"));
  }
}

TEST(NodeTest, AHostileLoadIsRefusedAndTheNodeServesTheNext) {
  const TempDir cache("cluster-test", "hostile");
  TestNode node("node-a", cache);
  {
    net::TcpTransportOptions t;
    t.auth.node_name = "mallory";
    net::TcpTransport transport(t);
    auto c = transport.connect(node.address(), net::Millis(3000));
    net::Frame frame;
    net::recv_message<net::Profile>(*c, net::Millis(3000), frame);
    for (const char* json : {"{", "[]", R"({"stage":0})",
                             R"({"stage":5,"n_stages":2,"layer_begin":0,"layer_end":1,)"
                             R"("embedding":true,"output":true,"n_ctx":8,"n_seq":1,)"
                             R"("wire_dtype":"f32","tensors":[]})"}) {
      net::send_message(*c, 0, net::Load{json, {}, ""});
      net::ErrorReply e = net::recv_message<net::ErrorReply>(*c, net::Millis(3000), frame);
      EXPECT_EQ(e.code, net::ErrorCode::LOAD_FAILED) << json;
    }
    net::send_message(*c, 0, net::Forward{});
    net::ErrorReply e = net::recv_message<net::ErrorReply>(*c, net::Millis(3000), frame);
    EXPECT_THAT(e.message, HasSubstr("before LOAD"));
    net::send_message(*c, 0, net::State{{{net::StateOpKind::HOLD, 0, 0}}});
    e = net::recv_message<net::ErrorReply>(*c, net::Millis(3000), frame);
    EXPECT_THAT(e.message, HasSubstr("STATE before LOAD"));
    // A STATE of an operation that does not exist ends the session, named.
    net::Payload bad = net::encode(net::State{{{net::StateOpKind::HOLD, 0, 0}}});
    bad.head[4] = 9;
    const net::ConstBytes parts[1] = {bad.head};
    c->send_frame_parts(net::FrameHeader{net::MessageType::STATE, 0, 0, bad.size()}, parts);
    e = net::recv_message<net::ErrorReply>(*c, net::Millis(3000), frame);
    EXPECT_THAT(e.message, HasSubstr("unknown operation 9"));
  }
  auto cluster =
      ClusterRunner::open("../shared/models/llama-q4_0.gguf", pipeline_options({node.address()}));
  EXPECT_EQ(cluster->plan().stages.size(), 2u);
}

TEST(PeersTest, AProfileBringsTotalAndUnifiedMemory) {
  const TempDir cache("cluster-test", "profile");
  TestNode node("node-a", cache);
  net::TcpTransportOptions t;
  t.auth.node_name = "planner";
  net::TcpTransport transport(t);
  std::vector<Peer> peers = connect_peers(transport, {node.address()}, net::Millis(3000));
  ASSERT_EQ(peers.size(), 1u);
  peers[0].connection->close();
  const NodeProfile& p = peers[0].profile;
  EXPECT_EQ(p.name, "node-a");
  EXPECT_EQ(p.total_memory_bytes, system_memory().total_bytes);
  EXPECT_EQ(p.unified_memory, system_memory().unified);
}

TEST(PeersTest, ProfileDetailsThatDoNotParseMeanNoUnifiedMemory) {
  net::Profile m;
  m.node_name = "mac";
  m.cores = 0;  // read as 1
  m.total_memory = uint64_t{48} << 30;
  m.free_memory = uint64_t{40} << 30;
  m.memory_bandwidth = 273;
  m.details_json = R"({"threads": 12, "unified_memory": true})";
  NodeProfile p = profile_from_message(m, "10.0.0.2:7070");
  EXPECT_TRUE(p.unified_memory);
  EXPECT_EQ(p.total_memory_bytes, uint64_t{48} << 30);
  EXPECT_EQ(p.cores, 1);
  EXPECT_EQ(p.address, "10.0.0.2:7070");
  for (const char* details : {"", "{", "[]", R"({"unified_memory": 1})", R"({"threads": 4})"}) {
    m.details_json = details;
    EXPECT_FALSE(profile_from_message(m, "x:1").unified_memory) << details;
  }
}

TEST(AssignmentTest, ATensorShapeWhoseProductWrapsAround64BitsIsRefused) {
  const auto with_shape = [](const char* shape) {
    Assignment a;
    a.shard.layer_end = 1;
    a.n_ctx = 8;
    a.tensors.push_back({"x", TensorType::F32, {1}});
    nlohmann::json j = to_json(a);
    j["tensors"][0]["shape"] = nlohmann::json::parse(shape);
    return j;
  };
  EXPECT_EQ(assignment_from_json(with_shape("[4096, 4096]")).tensors.at(0).shape.size(), 2u);
  EXPECT_EQ(assignment_from_json(with_shape("[1048576, 16777216]")).tensors.size(), 1u);  // 2^44
  for (const char* shape : {"[1099511627776, 1099511627776]", "[4194304, 4194304, 4194304]",
                            "[65536, 65536, 65536, 65536]", "[1048576, 16777217]"}) {
    try {
      assignment_from_json(with_shape(shape));
      ADD_FAILURE() << shape << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("too large")) << shape;
    }
  }
}

TEST(AssignmentTest, StageLinksAreCheckedOnArrival) {
  Assignment a;
  a.stage = 1;
  a.n_stages = 3;
  a.shard.layer_end = 1;
  a.n_ctx = 8;
  a.flow.token = 77;
  a.flow.next = {"127.0.0.1:7001", "127.0.0.1:7002"};
  a.flow.prev = 1;
  const Assignment b = assignment_from_json(to_json(a));
  EXPECT_EQ(b.flow.token, 77u);
  EXPECT_EQ(b.flow.next, a.flow.next);
  EXPECT_EQ(b.flow.prev, 1);
  nlohmann::json j = to_json(a);
  j.erase("flow");  // none: no stage links
  EXPECT_TRUE(assignment_from_json(j).flow.next.empty());
  const auto refused = [&](const char* what, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json bad = to_json(a);
    edit(bad);
    try {
      assignment_from_json(bad);
      ADD_FAILURE() << what << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("flow")) << what;
    }
  };
  refused("a string", [](nlohmann::json& x) { x["flow"] = "x"; });
  refused("no token", [](nlohmann::json& x) { x["flow"].erase("token"); });
  refused("token 0", [](nlohmann::json& x) { x["flow"]["token"] = 0; });
  refused("next not an array", [](nlohmann::json& x) { x["flow"]["next"] = "a:1"; });
  refused("a number address", [](nlohmann::json& x) { x["flow"]["next"][0] = 5; });
  refused("an empty address", [](nlohmann::json& x) { x["flow"]["next"][0] = ""; });
  refused("a newline", [](nlohmann::json& x) { x["flow"]["next"][0] = "a:1\n"; });
  refused("a long address",
          [](nlohmann::json& x) { x["flow"]["next"][0] = std::string(2000, 'a'); });
  refused("prev 2", [](nlohmann::json& x) { x["flow"]["prev"] = 2; });
  refused("prev -1", [](nlohmann::json& x) { x["flow"]["prev"] = -1; });
  refused("prev of stage 0", [](nlohmann::json& x) { x["stage"] = 0; });
  refused("next of the last stage", [](nlohmann::json& x) { x["stage"] = 2; });
}

TEST(AssignmentTest, ThePlannedDeviceTravelsAndIsChecked) {
  Assignment a;
  a.shard.layer_end = 1;
  a.n_ctx = 8;
  EXPECT_FALSE(assignment_from_json(to_json(a)).device.has_value());  // the node's --device
  a.device = "vulkan:1";
  EXPECT_EQ(assignment_from_json(to_json(a)).device, "vulkan:1");
  a.device = "cpu";
  EXPECT_EQ(assignment_from_json(to_json(a)).device, "cpu");
  for (const nlohmann::json& bad :
       {nlohmann::json("auto"), nlohmann::json("cuda"), nlohmann::json(3),
        nlohmann::json("vulkan:x"), nlohmann::json(std::string(100, 'v'))}) {
    nlohmann::json j = to_json(a);
    j["device"] = bad;
    try {
      assignment_from_json(j);
      ADD_FAILURE() << bad.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("device")) << bad.dump();
    }
  }
}

TEST(AssignmentTest, AStandbyAssignmentHasNoLinks) {
  Assignment a;
  a.stage = 1;
  a.n_stages = 3;
  a.n_ranks = 2;
  a.shard.layer_end = 1;
  a.n_ctx = 8;
  a.standby = true;
  EXPECT_TRUE(assignment_from_json(to_json(a)).standby);
  nlohmann::json j = to_json(a);
  j.erase("standby");  // absent: not a spare
  EXPECT_FALSE(assignment_from_json(j).standby);
  j["standby"] = 1;
  EXPECT_THROW(assignment_from_json(j), Error);
  a.ring.next.connect = "127.0.0.1:7001";
  try {
    assignment_from_json(to_json(a));
    ADD_FAILURE() << "a spare with a ring link was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("standby"));
  }
}

}  // namespace
}  // namespace herd::cluster
