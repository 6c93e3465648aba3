// Speculative decoding across a pod (issue 31): the pending token and its draft travel
// through the stages (and the tensor-parallel ranks) as one batch, so one round trip yields
// every kept token. Greedy output is the same with and without drafts, and fewer round trips
// are taken. The pod's nodes run in threads of this process, over TCP on 127.0.0.1.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_runner.h"
#include "cluster/test_node.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "util/temp_dir.h"

namespace herd::server {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  std::vector<int32_t> tokens;
  engine::Finish finish;
};

Outcome generate(engine::ModelRunner& runner, const tokenizer::Tokenizer& tok,
                 const std::vector<int32_t>& prompt, int lookup) {
  engine::Scheduler s(runner, tok, {}, nullptr);
  engine::GenerationParams p;
  p.prompt = prompt;
  p.max_tokens = 24;
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
      return out;
    }
  }
  ADD_FAILURE() << "the request did not finish";
  return out;
}

struct PodCase {
  std::string parallel;
  int nodes;
};

class SpeculativePod : public ::testing::TestWithParam<PodCase> {};

TEST_P(SpeculativePod, GreedyTokensAreTheSameInFewerRoundTrips) {
  const PodCase& c = GetParam();
  const std::string model = "../shared/models/llama-q8_0.gguf";
  const TempDir cache("speculative-pod", c.parallel == "pipeline" ? "pipeline" : "tensor");
  std::vector<std::unique_ptr<cluster::TestNode>> nodes;
  cluster::ClusterOptions o;
  for (int i = 0; i < c.nodes; ++i) {
    nodes.push_back(std::make_unique<cluster::TestNode>("node-" + std::to_string(i), cache));
    o.peers.push_back(nodes.back()->address());
  }
  parse_parallel(c.parallel, o.plan);
  o.plan.use_local = false;
  o.local.threads = 1;
  o.local.n_ctx = 96;
  o.local_bandwidth_gbs = 10;
  auto pod = cluster::ClusterRunner::open(model, o);
  const auto tok = tokenizer::Tokenizer::from_gguf(pod->file());
  const std::vector<int32_t> prompt =
      tok.encode("the herd runs the model and the herd", true, false);
  const Outcome plain = generate(*pod, tok, prompt, 0);
  const Outcome drafted = generate(*pod, tok, prompt, 4);
  EXPECT_EQ(drafted.tokens, plain.tokens) << pod->describe();
  EXPECT_EQ(plain.finish.n_target_steps, 24);
  EXPECT_GT(drafted.finish.n_draft_accepted, 0) << pod->describe();
  EXPECT_LT(drafted.finish.n_target_steps, plain.finish.n_target_steps);
}

INSTANTIATE_TEST_SUITE_P(Pods, SpeculativePod,
                         ::testing::Values(PodCase{"pipeline", 2}, PodCase{"tensor", 2}),
                         [](const auto& info) {
                           return info.param.parallel == "pipeline" ? std::string("Pipeline")
                                                                    : std::string("TensorPair");
                         });

}  // namespace
}  // namespace herd::server
