// Recurrent states on a pod (pod_states.cpp): on models with linear-attention layers (Gated
// DeltaNet: qwen35, qwen35moe, qwen3next) and DeepSeek V4's compressed cache, a pod holds a
// slot's states before a step that checks a draft and returns to them where the check refuses
// part of it, on every rank (a 2-stage pipeline of nodes, whose second stage gets its batches
// straight from the first; a tensor-parallel pair, each rank with its slice of the states; a
// stage of this process's own), and keeps snapshots for a follow-up request to continue from.
// The nodes run in threads of this process, over TCP on 127.0.0.1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cluster/cluster_runner.h"
#include "cluster/test_node.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace herd::cluster {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct Outcome {
  std::vector<int32_t> tokens;
  engine::Finish finish;
};

// Greedy tokens of one request on `s` (lookup > 0: prompt-lookup drafts of up to that many).
Outcome generate(engine::Scheduler& s, const std::vector<int32_t>& prompt, int lookup,
                 int64_t max_tokens) {
  engine::GenerationParams p;
  p.prompt = prompt;
  p.max_tokens = max_tokens;
  p.sampler.temperature = 0;
  p.stop_at_eog = false;
  if (lookup > 0) p.speculative = engine::SpeculativeParams{lookup, 1, 3};
  auto stream = s.submit(p);
  Outcome out;
  for (int i = 0; i < 1000; ++i) {
    s.step();
    engine::StreamUpdate u = stream->wait(0ms);
    out.tokens.insert(out.tokens.end(), u.tokens.begin(), u.tokens.end());
    if (u.finish) {
      out.finish = *u.finish;
      if (out.finish.reason == engine::FinishReason::kError) {
        ADD_FAILURE() << "the request failed: " << out.finish.error;
      }
      return out;
    }
  }
  ADD_FAILURE() << "the request did not finish";
  return out;
}

Outcome generate(engine::ModelRunner& runner, const tokenizer::Tokenizer& tok,
                 const std::vector<int32_t>& prompt, int lookup, int64_t max_tokens) {
  engine::Scheduler s(runner, tok, {}, nullptr);
  return generate(s, prompt, lookup, max_tokens);
}

struct PodCase {
  std::string model;     // in ../shared/models/frontier2
  std::string parallel;  // --parallel
  int nodes;
  bool use_local;  // this process runs a stage (or rank) too
};
void PrintTo(const PodCase& c, std::ostream* os) {
  *os << c.model << " " << c.parallel << " over " << c.nodes << " nodes"
      << (c.use_local ? " and this process" : "");
}

class RecurrentPod : public ::testing::TestWithParam<PodCase> {};

TEST_P(RecurrentPod, DraftsRollBackAndAFollowUpContinuesFromASnapshot) {
  const PodCase& c = GetParam();
  const std::string model = "../shared/models/frontier2/" + c.model + ".gguf";
  const TempDir cache("cluster-recurrent", c.model + "-" + c.parallel);
  std::vector<std::unique_ptr<TestNode>> nodes;
  ClusterOptions o;
  for (int i = 0; i < c.nodes; ++i) {
    nodes.push_back(std::make_unique<TestNode>("node-" + std::to_string(i), cache));
    o.peers.push_back(nodes.back()->address());
  }
  parse_parallel(c.parallel, o.plan);
  o.plan.use_local = c.use_local;
  o.local.threads = 1;
  o.local.n_ctx = 128;
  o.local_bandwidth_gbs = 10;  // as fast as the test nodes: every node gets a part
  o.measure_links = false;
  auto pod = ClusterRunner::open(model, o);
  size_t max_ranks = 0;
  for (const Stage& s : pod->plan().stages) max_ranks = std::max(max_ranks, s.ranks.size());
  if (c.parallel == "pipeline") {
    ASSERT_EQ(pod->plan().stages.size(), 2u) << pod->describe();
  } else {
    ASSERT_EQ(max_ranks, 2u) << pod->describe();
  }
  ASSERT_TRUE(pod->recurrent());
  ASSERT_TRUE(pod->holds_states()) << pod->describe();
  const auto tok = tokenizer::Tokenizer::from_gguf(pod->file());
  const std::vector<int32_t> prompt =
      tok.encode("the herd runs the model and the herd", true, false);

  // Drafts: the same greedy tokens; some refused, so the states went back.
  const Outcome plain = generate(*pod, tok, prompt, 0, 24);
  const Outcome drafted = generate(*pod, tok, prompt, 4, 24);
  EXPECT_EQ(drafted.tokens, plain.tokens) << pod->describe();
  EXPECT_GT(drafted.finish.n_drafted, drafted.finish.n_draft_accepted) << pod->describe();
  if (c.parallel == "pipeline") {
    // Stages give one process's logits bit for bit.
    engine::LocalOptions lo;
    lo.threads = 1;
    lo.n_ctx = 128;
    EXPECT_EQ(generate(*engine::LocalRunner::open(model, lo), tok, prompt, 0, 24).tokens,
              plain.tokens);
  }

  // A follow-up that repeats the prompt and the reply continues from the pod's snapshot,
  // with the tokens a cold run of it gives.
  std::vector<int32_t> follow = prompt;
  follow.insert(follow.end(), plain.tokens.begin(), plain.tokens.begin() + 12);
  for (int32_t t : tok.encode(" and the pod", false, false)) follow.push_back(t);
  const Outcome cold = generate(*pod, tok, follow, 0, 12);
  EXPECT_EQ(cold.finish.n_cached, 0);
  engine::Scheduler s(*pod, tok, {}, nullptr);
  const Outcome first = generate(s, prompt, 0, 12);
  EXPECT_EQ(first.tokens, std::vector<int32_t>(plain.tokens.begin(), plain.tokens.begin() + 12));
  const Outcome warm = generate(s, follow, 0, 12);
  EXPECT_GT(warm.finish.n_cached, static_cast<int64_t>(prompt.size())) << pod->describe();
  EXPECT_EQ(warm.tokens, cold.tokens) << pod->describe();
  // With drafts on top.
  const Outcome warm_drafted = generate(s, follow, 4, 12);
  EXPECT_GT(warm_drafted.finish.n_cached, 0);
  EXPECT_EQ(warm_drafted.tokens, cold.tokens) << pod->describe();
  std::printf(
      "%s: %lld of %lld draft tokens kept in %lld steps (%lld without); a follow-up "
      "continued at %lld of %zu\n",
      pod->describe().c_str(), static_cast<long long>(drafted.finish.n_draft_accepted),
      static_cast<long long>(drafted.finish.n_drafted),
      static_cast<long long>(drafted.finish.n_target_steps),
      static_cast<long long>(plain.finish.n_target_steps),
      static_cast<long long>(warm.finish.n_cached), follow.size());
}

INSTANTIATE_TEST_SUITE_P(Models, RecurrentPod,
                         ::testing::Values(PodCase{"qwen35-q8_0", "pipeline", 2, false},
                                           PodCase{"qwen35-q8_0", "tensor", 2, false},
                                           PodCase{"qwen35moe-q8_0", "pipeline", 2, false},
                                           PodCase{"qwen35moe-q8_0", "tensor", 2, false},
                                           PodCase{"qwen3next-q8_0", "pipeline", 2, false},
                                           PodCase{"qwen3next-q8_0", "tensor", 2, false},
                                           // Compressed attention is not cut by tensor parallelism.
                                           PodCase{"deepseek4-q8_0", "pipeline", 2, false},
                                           // This process's own stage beside a node's.
                                           PodCase{"qwen35-q8_0", "pipeline", 1, true},
                                           PodCase{"deepseek4-q8_0", "pipeline", 1, true}),
                         [](const auto& info) {
                           std::string name = info.param.model + "_" + info.param.parallel +
                                              (info.param.use_local ? "_local" : "_nodes");
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// A return to a held state that was never held is refused by the rank that cannot do it,
// named, with the next batch (the operation goes out with it).
TEST(RecurrentPodTest, AReturnWithNothingHeldIsRefusedNamingTheNode) {
  const std::string model = "../shared/models/frontier2/qwen35-q8_0.gguf";
  const TempDir cache("cluster-recurrent", "unheld");
  TestNode node("node-a", cache);
  ClusterOptions o;
  o.peers = {node.address()};
  o.plan.mode = PlanOptions::Mode::kPipeline;
  o.plan.use_local = false;
  o.local.threads = 1;
  o.local.n_ctx = 64;
  o.local_bandwidth_gbs = 10;
  o.measure_links = false;
  auto pod = ClusterRunner::open(model, o);
  EXPECT_THROW(pod->hold_state(5), Error);  // one slot
  pod->return_to_held_state(0);
  engine::Batch b;
  b.add(1, 0, 0, true);
  std::vector<float> logits;
  try {
    pod->forward(b, logits);
    FAIL() << "a return with nothing held was done";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no recurrent state is held for slot 0"));
    EXPECT_THAT(e.what(), HasSubstr("node-a"));
  }
}

}  // namespace
}  // namespace herd::cluster
