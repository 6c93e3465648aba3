// Properties of plan() over thousands of random models, clusters and options (seeded, so a
// failure repeats): every plan keeps the contract check_plan() enforces (every layer,
// head, FFN row, expert and vocabulary row owned exactly once; every KV head read; memory
// within every node), the same input gives the same plan, the JSON round-trips, and
// refusals are herd::Errors with the numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "plan/plan_check.h"
#include "plan/planner.h"
#include "plan/rank_memory.h"
#include "util/error.h"

namespace herd {
namespace {

struct Case {
  PlanModel model;
  std::vector<NodeProfile> nodes;
  PlanOptions options;
  std::string description;
};

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  // n_nodes 0: a cluster of 1 to 17 nodes; else exactly n_nodes.
  Case next(int64_t n_nodes = 0) {
    Case c;
    c.model = model();
    c.nodes = nodes(c.model, n_nodes);
    c.options = options(c.nodes.size());
    c.description = describe(c);
    return c;
  }

 private:
  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + uniform(0, static_cast<int64_t>(values.size()) - 1));
  }

  PlanModel model() {
    const ArchSpec& arch = *find_arch(pick({"llama", "qwen2", "qwen3", "qwen3moe"}));
    HParams hp;
    hp.n_head_kv = pick<int64_t>({1, 2, 3, 4, 8});
    hp.n_head = hp.n_head_kv * pick<int64_t>({1, 2, 4, 6, 8});
    hp.head_dim = pick<int64_t>({32, 64, 128});
    hp.head_dim_v = hp.n_rot = hp.head_dim;
    hp.n_embd = arch.explicit_head_dim ? 64 * uniform(1, 64) : hp.n_head * hp.head_dim;
    hp.n_layer = uniform(1, 48);
    hp.n_vocab = uniform(100, 160000);
    hp.n_ctx = 4096;
    hp.tied_output = uniform(0, 1) == 1;
    if (arch.moe) {
      hp.n_expert = uniform(2, 64);
      hp.n_expert_used = uniform(1, std::min<int64_t>(8, hp.n_expert));
      hp.n_ff_expert = 32 * uniform(1, 48);
    } else {
      hp.n_ff = 32 * uniform(2, 512);
    }
    PlanModel m = synthetic_plan_model(
        arch, hp, pick({TensorType::F16, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}));
    // Mixed-type files (Q4_K_M) have bigger layers here and there.
    for (PlanLayer& l : m.layers) {
      if (uniform(0, 3) == 0) l.ffn_bytes += l.ffn_bytes / 2;
      if (uniform(0, 3) == 0) l.attn_kv_bytes += l.attn_kv_bytes / 3;
    }
    return m;
  }

  std::vector<NodeProfile> nodes(const PlanModel& m, int64_t n_nodes) {
    const int64_t n =
        n_nodes > 0 ? n_nodes : pick<int64_t>({1, 2, 3, 4, 5, 7, 8, 16}) + uniform(0, 1);
    // Together the nodes offer between 0.3 and 6 times the weights; some a lot less. A
    // large cluster: each node between 1/50 and 2 times the weights.
    const double total = static_cast<double>(m.weight_bytes()) *
                         (n_nodes > 0 ? static_cast<double>(n) * real(0.02, 2.0) : real(0.3, 6.0));
    const bool similar = uniform(0, 2) == 0;
    std::vector<double> weights;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      weights.push_back(uniform(0, 6) == 0 ? real(0.001, 0.05) : real(0.5, 1.5));
      sum += weights.back();
    }
    std::vector<NodeProfile> nodes;
    for (int64_t i = 0; i < n; ++i) {
      NodeProfile node;
      node.name = i == 0 ? "local" : "n" + std::to_string(i);
      node.address =
          i == 0 ? "local"
                 : "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + ":7000";
      node.cores = static_cast<int>(uniform(1, 64));
      node.free_memory_bytes = static_cast<uint64_t>(total * weights[static_cast<size_t>(i)] / sum);
      node.bandwidth_gbs = similar ? real(50, 55) : real(5, 400);
      // Known matmul speeds (prefill counts too) in about half the clusters' nodes.
      node.matmul_gflops = uniform(0, 1) == 0 ? 0 : real(20, 4000);
      nodes.push_back(node);
    }
    return nodes;
  }

  PlanOptions options(size_t n_nodes) {
    PlanOptions o;
    o.use_local = n_nodes == 1 || uniform(0, 9) != 0;
    const int64_t usable = static_cast<int64_t>(n_nodes) - (o.use_local ? 0 : 1);
    o.mode = pick({PlanOptions::Mode::kAuto, PlanOptions::Mode::kPipeline,
                   PlanOptions::Mode::kTensor, PlanOptions::Mode::kHybrid});
    if (o.mode == PlanOptions::Mode::kHybrid) {
      o.tensor_ranks = static_cast<int>(uniform(1, usable));
      o.pipeline_stages = static_cast<int>(uniform(1, usable / o.tensor_ranks));
    }
    o.moe = pick({PlanOptions::MoeMode::kAuto, PlanOptions::MoeMode::kExpertParallel,
                  PlanOptions::MoeMode::kSplitExperts});
    o.n_ctx = pick<int64_t>({64, 512, 2048, 8192, 32768});
    o.n_seq = pick<int64_t>({1, 1, 2, 4});
    o.n_batch = pick<int64_t>({1, 64, 256});
    o.memory_headroom = real(0.5, 1.0);
    return o;
  }

  static std::string describe(const Case& c) {
    const PlanModel& m = c.model;
    std::string s = m.arch + " L" + std::to_string(m.n_layer) + " H" + std::to_string(m.n_head) +
                    "/" + std::to_string(m.n_head_kv) + " ff" + std::to_string(m.n_ff) + " E" +
                    std::to_string(m.n_expert) + " vocab" + std::to_string(m.n_vocab) + " on " +
                    std::to_string(c.nodes.size()) + " nodes, mode " +
                    std::to_string(static_cast<int>(c.options.mode)) + " P" +
                    std::to_string(c.options.pipeline_stages) + " T" +
                    std::to_string(c.options.tensor_ranks) + " moe " +
                    std::to_string(static_cast<int>(c.options.moe)) +
                    (c.options.use_local ? "" : " --no-local");
    return s;
  }

  std::mt19937_64 rng_;
};

// PLAN_SEED and PLAN_CASES sweep other or more cases than the default run, e.g.
// PLAN_SEED=7 PLAN_CASES=100000 build/src/plan/plan_test --gtest_filter='PlannerProperties*'
int env_or(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

// Whether one node alone can hold the whole model: then a pipeline plan must exist.
bool fits_one_node(const Case& c) {
  RankLoad all;
  all.n_layers = c.model.n_layer;
  for (const PlanLayer& l : c.model.layers) {
    all.layers.replicated_bytes += l.replicated_bytes;
    all.layers.attn_q_bytes += l.attn_q_bytes;
    all.layers.attn_kv_bytes += l.attn_kv_bytes;
    all.layers.ffn_bytes += l.ffn_bytes;
  }
  all.heads = c.model.n_head;
  all.kv_heads = c.model.n_head_kv;
  all.ffn_cells = c.model.n_ff * std::max<int64_t>(1, c.model.n_expert);
  all.vocab_rows = c.model.n_vocab;
  all.embedding = all.output = true;
  const uint64_t need = estimate_memory(c.model, c.options, all).total();
  for (size_t i = c.options.use_local ? 0 : 1; i < c.nodes.size(); ++i) {
    if (need <= usable_memory(c.nodes[i], c.options)) return true;
  }
  return false;
}

TEST(PlannerProperties, RandomModelsAndClusters) {
  Generator generate(static_cast<uint64_t>(env_or("PLAN_SEED", 20240611)));
  const int n_cases = env_or("PLAN_CASES", 3000);
  int planned = 0, refused = 0, multi_rank = 0, multi_stage = 0;
  for (int i = 0; i < n_cases; ++i) {
    const Case c = generate.next();
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.description);
    Plan p;
    try {
      p = plan(c.model, c.nodes, c.options);
    } catch (const Error& e) {
      const std::string what = e.what();
      ASSERT_EQ(what.rfind("[plan] ", 0), 0u) << what;
      ASSERT_TRUE(what.find("GiB") != std::string::npos || what.find("MiB") != std::string::npos)
          << what;
      if (c.options.mode == PlanOptions::Mode::kPipeline) {
        ASSERT_FALSE(fits_one_node(c)) << "refused although one node holds it all: " << what;
      }
      // The same input is refused the same way.
      try {
        plan(c.model, c.nodes, c.options);
        FAIL() << "planned the second time";
      } catch (const Error& again) {
        ASSERT_EQ(what, again.what());
      }
      ++refused;
      continue;
    }
    ++planned;
    ASSERT_NO_THROW(check_plan(p, c.model, c.nodes, c.options)) << to_json(p).dump();
    const nlohmann::json j = to_json(p);
    ASSERT_EQ(to_json(plan(c.model, c.nodes, c.options)).dump(), j.dump());
    ASSERT_EQ(plan_from_json(nlohmann::json::parse(j.dump())), p);
    for (const Stage& s : p.stages) multi_rank += s.ranks.size() > 1;
    multi_stage += p.stages.size() > 1;
  }
  // The generator must exercise both outcomes and every kind of plan.
  EXPECT_GT(planned, n_cases / 3);
  EXPECT_GT(refused, n_cases / 30);
  EXPECT_GT(multi_rank, n_cases / 10);
  EXPECT_GT(multi_stage, n_cases / 10);
  std::printf("planned %d, refused %d; %d tensor stages, %d multi-stage plans\n", planned, refused,
              multi_rank, multi_stage);
}

// Clusters of hundreds to a thousand nodes (a herd of herds, or the planner given every
// node a discovery found): the same properties, and the plan made in bounded time.
TEST(PlannerProperties, ThousandNodeClusters) {
  Generator generate(static_cast<uint64_t>(env_or("PLAN_SEED", 20261202)));
  const int n_cases = env_or("PLAN_LARGE_CASES", 40);
  int planned = 0, refused = 0;
  for (int i = 0; i < n_cases; ++i) {
    const int64_t n_nodes = i % 4 == 0 ? 1000 : i % 4 == 1 ? 513 : i % 4 == 2 ? 256 : 100;
    const Case c = generate.next(n_nodes);
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.description);
    Plan p;
    try {
      p = plan(c.model, c.nodes, c.options);
    } catch (const Error& e) {
      const std::string what = e.what();
      ASSERT_EQ(what.rfind("[plan] ", 0), 0u) << what;
      if (std::getenv("PLAN_VERBOSE")) std::printf("refused: %s\n", what.c_str());
      ++refused;
      continue;
    }
    ++planned;
    ASSERT_NO_THROW(check_plan(p, c.model, c.nodes, c.options)) << to_json(p).dump();
    ASSERT_EQ(to_json(plan(c.model, c.nodes, c.options)).dump(), to_json(p).dump());
    for (const Stage& s : p.stages) {
      for (const Rank& r : s.ranks) ASSERT_LT(static_cast<size_t>(r.node), c.nodes.size());
    }
  }
  EXPECT_GT(planned, n_cases / 4);
  std::printf("1000-node clusters: planned %d, refused %d\n", planned, refused);
}

}  // namespace
}  // namespace herd
