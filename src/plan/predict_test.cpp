// predict(): figures a person can check by hand, and the choices the links should make.
#include "plan/predict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plan/candidates.h"
#include "plan/planner.h"

namespace herd {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Llama hyper-parameters with 64-wide heads and a 32000-token vocabulary.
HParams llama_shape(int64_t n_embd, int64_t n_ff, int64_t n_layer, int64_t n_head_kv) {
  HParams hp;
  hp.n_vocab = 32000;
  hp.n_embd = n_embd;
  hp.n_ff = n_ff;
  hp.n_layer = n_layer;
  hp.n_head = n_embd / 64;
  hp.n_head_kv = n_head_kv;
  hp.head_dim = 64;
  hp.head_dim_v = hp.n_rot = hp.head_dim;
  hp.n_ctx = 2048;
  return hp;
}

// A 1.1B-shaped llama in Q4_0 (TinyLlama: 22 layers of 2048, 32 heads, 4 KV heads).
PlanModel tinyllama() {
  return synthetic_plan_model(*find_arch("llama"), llama_shape(2048, 5632, 22, 4),
                              TensorType::Q4_0);
}

// A small llama (8 layers of 512 in Q8_0): its weights take a few milliseconds a token,
// as long as its all-reduces on a slow link, so the link decides between tensor and
// pipeline.
PlanModel small_llama() {
  return synthetic_plan_model(*find_arch("llama"), llama_shape(512, 1536, 8, 8), TensorType::Q8_0);
}

NodeProfile machine(std::string name, double bandwidth_gbs, double gflops = 100) {
  NodeProfile n;
  n.name = name;
  n.address = name == "local" ? "local" : name + ":7000";
  n.cores = 8;
  n.free_memory_bytes = 16 * kGiB;
  n.bandwidth_gbs = bandwidth_gbs;
  n.matmul_gflops = gflops;
  return n;
}

Links links_of(size_t n, double one_way_seconds, double bytes_per_s) {
  Links l;
  LinkProfile p;
  p.rtt_seconds = 2 * one_way_seconds;
  p.send_bytes_per_s = p.receive_bytes_per_s = bytes_per_s;
  l.to_node.assign(n, p);
  return l;
}

PlanOptions mode(PlanOptions::Mode m) {
  PlanOptions o;
  o.mode = m;
  o.n_ctx = 1024;
  return o;
}

TEST(PredictTest, OneMachineReadsEveryWeightOnceAPerToken) {
  const PlanModel m = tinyllama();
  const std::vector<NodeProfile> nodes = {machine("local", 20)};
  const PlanOptions o = mode(PlanOptions::Mode::kAuto);
  const Plan p = plan(m, nodes, o);
  PredictCosts c;
  const Prediction got = predict(p, m, nodes, links_of(1, 0, 1), o, c);
  // Every weight but the embedding (one row per token) is read once per token.
  const double read = static_cast<double>(m.weight_bytes() - m.embedding_bytes);
  EXPECT_NEAR(got.decode_compute_seconds, read / (20e9 * c.decode_efficiency), 1e-6);
  EXPECT_EQ(got.decode_wire_seconds, 0);
  EXPECT_EQ(got.decode_allreduce_seconds, 0);
  EXPECT_NEAR(got.decode_tokens_per_s, 1 / got.decode_compute_seconds, 1e-9);
  // Prefill: the layers' matrix work over the matmul speed.
  const double flops = m.layer_flops_per_token() * 22 * 256;
  EXPECT_NEAR(got.prefill_tokens_per_s, 256 / (flops / (100e9 * c.prefill_efficiency)), 1);
}

TEST(PredictTest, MessagesCostLatencyAndBytes) {
  const PlanModel m = tinyllama();
  const std::vector<NodeProfile> nodes = {machine("local", 20), machine("b", 20)};
  const PlanOptions o = mode(PlanOptions::Mode::kPipeline);
  const Plan p = plan(m, nodes, o);
  PredictCosts c;
  c.message_seconds = 0;
  const Prediction fast = predict(p, m, nodes, links_of(2, 50e-6, 1.25e9), o, c);
  const Prediction slow = predict(p, m, nodes, links_of(2, 300e-6, 125e6), o, c);
  // Two messages per token: the hidden state to b (2048 x 4 bytes), the logits back
  // (32000 x 4 bytes).
  EXPECT_NEAR(slow.decode_wire_seconds, 2 * 300e-6 + (2048 * 4 + 32000 * 4) / 125e6, 1e-9);
  EXPECT_NEAR(fast.decode_wire_seconds, 2 * 50e-6 + (2048 * 4 + 32000 * 4) / 1.25e9, 1e-9);
  EXPECT_EQ(fast.decode_compute_seconds, slow.decode_compute_seconds);
  EXPECT_GT(fast.decode_tokens_per_s, slow.decode_tokens_per_s);
  // A message's fixed cost counts on an assumed link, not a measured one (its round trip
  // holds it already).
  c.message_seconds = 1e-3;
  Links measured = links_of(2, 300e-6, 125e6);
  EXPECT_NEAR(predict(p, m, nodes, measured, o, c).decode_wire_seconds,
              slow.decode_wire_seconds + 2e-3, 1e-9);
  measured.to_node[1].measured = true;
  EXPECT_NEAR(predict(p, m, nodes, measured, o, c).decode_wire_seconds, slow.decode_wire_seconds,
              1e-9);
}

// The choice the links should make (issue 18): on a slow link the all-reduces (two per
// layer, 16 here) cost more than tensor parallelism saves; on a fast one they do not.
TEST(PredictTest, TensorParallelLosesOnASlowLinkAndWinsOnAFastOne) {
  const PlanModel m = small_llama();
  const std::vector<NodeProfile> nodes = {machine("local", 1), machine("b", 10), machine("c", 10)};
  PlanOptions po = mode(PlanOptions::Mode::kPipeline), to = mode(PlanOptions::Mode::kTensor);
  po.use_local = to.use_local = false;
  const Plan pipeline = plan(m, nodes, po), tensor = plan(m, nodes, to);
  ASSERT_EQ(pipeline.stages.size(), 2u);
  ASSERT_EQ(tensor.stages[0].ranks.size(), 2u);
  const Links gigabit = links_of(3, 300e-6, 125e6), ten_gigabit = links_of(3, 50e-6, 1.25e9);
  const Prediction p1 = predict(pipeline, m, nodes, gigabit, po);
  const Prediction t1 = predict(tensor, m, nodes, gigabit, to);
  const Prediction p10 = predict(pipeline, m, nodes, ten_gigabit, po);
  const Prediction t10 = predict(tensor, m, nodes, ten_gigabit, to);
  EXPECT_LT(t1.decode_tokens_per_s, p1.decode_tokens_per_s)
      << prediction_text(t1) << " vs " << prediction_text(p1);
  EXPECT_GT(t10.decode_tokens_per_s, p10.decode_tokens_per_s)
      << prediction_text(t10) << " vs " << prediction_text(p10);
  // 16 all-reduces (two per layer), each one step: the whole 2 KiB vector to the other.
  EXPECT_NEAR(t1.decode_allreduce_seconds,
              16 * (300e-6 + 512 * 4 / 125e6 + PredictCosts{}.message_seconds +
                    PredictCosts{}.ring_step_seconds),
              1e-9);
}

TEST(PredictTest, AnMoeReadsOnlyItsRoutedExperts) {
  HParams hp = llama_shape(1024, 0, 4, 4);
  hp.n_expert = 64;
  hp.n_expert_used = 4;
  hp.n_ff_expert = 512;
  const PlanModel moe = synthetic_plan_model(*find_arch("qwen3moe"), hp, TensorType::Q8_0);
  const std::vector<NodeProfile> nodes = {machine("local", 10)};
  const PlanOptions o = mode(PlanOptions::Mode::kAuto);
  const Prediction got = predict(plan(moe, nodes, o), moe, nodes, links_of(1, 0, 1), o);
  uint64_t ffn = 0;
  for (const PlanLayer& l : moe.layers) ffn += l.ffn_bytes;
  const double read = static_cast<double>(moe.weight_bytes() - moe.embedding_bytes) -
                      static_cast<double>(ffn) * (1 - 4.0 / 64);
  EXPECT_NEAR(got.decode_compute_seconds, read / (10e9 * PredictCosts{}.decode_efficiency), 1e-7);
}

// Two nodes on Thunderbolt, the coordinator on Wi-Fi: the link the nodes measured between
// them counts for what runs between them, not one inferred from the coordinator's links.
TEST(PredictTest, AMeasuredLinkBetweenNodesIsTheOneUsed) {
  Links l = links_of(3, 3e-3, 10e6);  // 3 ms and 10 MB/s to each node
  EXPECT_NEAR(l.latency(1, 2), 3e-3, 1e-12);
  EXPECT_EQ(l.bandwidth(1, 2), 10e6);
  EXPECT_FALSE(l.measured(1, 2));
  LinkProfile thunderbolt;
  thunderbolt.rtt_seconds = 40e-6;
  thunderbolt.send_bytes_per_s = 2e9;     // 1 -> 2
  thunderbolt.receive_bytes_per_s = 1e9;  // 2 -> 1
  thunderbolt.measured = true;
  l.between[{1, 2}] = thunderbolt;
  EXPECT_NEAR(l.latency(1, 2), 20e-6, 1e-12);
  EXPECT_NEAR(l.latency(2, 1), 20e-6, 1e-12);
  EXPECT_EQ(l.bandwidth(1, 2), 2e9);
  EXPECT_EQ(l.bandwidth(2, 1), 1e9);
  EXPECT_TRUE(l.measured(1, 2));
  EXPECT_NEAR(l.latency(0, 2), 3e-3, 1e-12);  // the coordinator's own link is unchanged
  // A prefix of the nodes keeps the links among them.
  EXPECT_EQ(l.first(3).between.size(), 1u);
  EXPECT_TRUE(l.first(2).between.empty());
  // Tensor parallelism between the two: its all-reduces run on the fast link.
  const PlanModel m = small_llama();
  const std::vector<NodeProfile> nodes = {machine("local", 1), machine("b", 10), machine("c", 10)};
  PlanOptions to = mode(PlanOptions::Mode::kTensor);
  to.use_local = false;
  const Plan tensor = plan(m, nodes, to);
  const Links slow = links_of(3, 3e-3, 10e6);
  EXPECT_LT(predict(tensor, m, nodes, l, to).decode_allreduce_seconds * 20,
            predict(tensor, m, nodes, slow, to).decode_allreduce_seconds);
}

TEST(PredictTest, StageLinksSaveAHopPerStage) {
  const PlanModel m = tinyllama();
  const std::vector<NodeProfile> nodes = {machine("local", 20), machine("b", 20), machine("c", 20),
                                          machine("d", 20)};
  PlanOptions o = mode(PlanOptions::Mode::kPipeline);
  o.use_local = false;
  const Plan p = plan(m, nodes, o);
  ASSERT_EQ(p.stages.size(), 3u);
  PredictCosts linked, through;
  through.stage_links = false;
  const Links l = links_of(4, 300e-6, 125e6);
  const double hop = 300e-6 + 2048 * 4 / 125e6 + linked.message_seconds;
  EXPECT_NEAR(predict(p, m, nodes, l, o, through).decode_wire_seconds -
                  predict(p, m, nodes, l, o, linked).decode_wire_seconds,
              2 * hop, 1e-9);
}

TEST(CandidatesTest, TheLinksDecideBetweenTensorAndPipeline) {
  const PlanModel m = small_llama();
  const std::vector<NodeProfile> nodes = {machine("local", 1), machine("b", 10), machine("c", 10),
                                          machine("d", 4, 40)};
  PlanOptions o = mode(PlanOptions::Mode::kAuto);
  o.use_local = false;
  const std::vector<Candidate> slow =
      plan_candidates(m, nodes, links_of(4, 300e-6, 125e6), o, PredictCosts{});
  const std::vector<Candidate> fast =
      plan_candidates(m, nodes, links_of(4, 20e-6, 5e9), o, PredictCosts{});
  // 3 alone, pipelines of 3 and 2, tensors of 3 and 2: 7, every one fits, fastest first.
  ASSERT_EQ(slow.size(), 7u);
  for (size_t i = 0; i < slow.size(); ++i) {
    ASSERT_TRUE(slow[i].plan) << slow[i].name << ": " << slow[i].why_not;
    if (i > 0) {
      EXPECT_LE(slow[i - 1].seconds, slow[i].seconds);
    }
    for (const Stage& s : slow[i].plan->stages) {
      for (const Rank& r : s.ranks) EXPECT_NE(r.node, 0) << slow[i].name;  // --no-local
    }
  }
  // Slow: every all-reduce costs more than a rank saves; the slow d still shortens the
  // pipeline's prefill. Fast: the two fast nodes as tensor ranks (a third rank would take
  // each all-reduce round the ring in two steps instead of one).
  EXPECT_EQ(slow[0].name, "pipeline of 'b', 'c', 'd'");
  EXPECT_EQ(fast[0].name, "tensor of 'b', 'c'");
  EXPECT_THAT(why_fastest(fast), ::testing::HasSubstr("as fast as the next"));
}

int nodes_used(const Plan& p) {
  int n = 0;
  for (const Stage& s : p.stages) n += static_cast<int>(s.ranks.size());
  return n;
}

// --parallel auto runs the fastest predicted candidate and says why; other modes are run
// as asked.
TEST(CandidatesTest, AutoRunsTheFastestPredictedPlan) {
  const PlanModel m = small_llama();
  const std::vector<NodeProfile> nodes = {machine("local", 1), machine("b", 10), machine("c", 10),
                                          machine("d", 1, 10)};
  PlanOptions o = mode(PlanOptions::Mode::kAuto);
  o.use_local = false;
  const Links fast = links_of(4, 20e-6, 5e9), slow = links_of(4, 300e-6, 125e6);
  // Fast links: b and c as tensor ranks; the slow d would slow any plan it is in.
  const Plan on_fast = plan_fastest(m, nodes, fast, o, PredictCosts{});
  ASSERT_EQ(on_fast.stages.size(), 1u);
  EXPECT_EQ(on_fast.stages[0].ranks.size(), 2u);
  EXPECT_THAT(on_fast.notes, ::testing::Contains(::testing::HasSubstr(
                                 "auto: the fastest predicted of 7 ways that fit: tensor of")));
  EXPECT_THAT(on_fast.notes, ::testing::Contains(::testing::HasSubstr(
                                 "node 'd' left out: the plans with it are predicted slower")));
  // Slow links: the all-reduces cost more than a rank saves; no tensor-parallel stage.
  const Plan on_slow = plan_fastest(m, nodes, slow, o, PredictCosts{});
  for (const Stage& s : on_slow.stages) EXPECT_EQ(s.ranks.size(), 1u);
  // Nodes too small for the model alone: the fastest plan that fits splits it.
  std::vector<NodeProfile> small = nodes;
  for (size_t i = 1; i < small.size(); ++i) small[i].free_memory_bytes = m.weight_bytes() * 3 / 2;
  EXPECT_GE(nodes_used(plan_fastest(m, small, slow, o, PredictCosts{})), 2);
  // Any other mode: as asked.
  o.mode = PlanOptions::Mode::kPipeline;
  EXPECT_EQ(plan_fastest(m, nodes, slow, o, PredictCosts{}).stages, plan(m, nodes, o).stages);
}

}  // namespace
}  // namespace herd
