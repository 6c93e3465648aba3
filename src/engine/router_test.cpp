#include "engine/router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace herd::engine {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// Qwen3-MoE / gpt-oss: softmax over all experts, the best k, renormalised; the same as a
// softmax over the k chosen logits.
TEST(Router, SoftmaxTopKRenormalised) {
  RouterOptions o;
  o.n_expert = 4;
  o.n_used = 2;
  Router r(o);
  const float logits[4] = {0.0f, 2.0f, 1.0f, -1.0f};
  int32_t experts[2];
  float weights[2];
  r.route(logits, nullptr, experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 2);
  EXPECT_NEAR(weights[0], 1 / (1 + std::exp(-1.0f)), 1e-6);  // e^2 / (e^2 + e^1)
  EXPECT_NEAR(weights[1], 1 / (1 + std::exp(1.0f)), 1e-6);
}

// DeepSeek V2: softmax, not renormalised, scaled.
TEST(Router, SoftmaxWithoutNormScaled) {
  RouterOptions o;
  o.n_expert = 3;
  o.n_used = 1;
  o.norm_weights = false;
  o.weights_scale = 16.0f;
  Router r(o);
  const float logits[3] = {0.0f, 0.0f, std::log(2.0f)};
  int32_t e;
  float w;
  r.route(logits, nullptr, &e, &w);
  EXPECT_EQ(e, 2);
  EXPECT_NEAR(w, 16.0f * 0.5f, 1e-5);  // 2 / (1 + 1 + 2)
}

// DeepSeek V3: sigmoid scores; the bias decides the choice but not the weights.
TEST(Router, SigmoidBiasChoosesOnly) {
  RouterOptions o;
  o.n_expert = 4;
  o.n_used = 2;
  o.gating = Gating::kSigmoid;
  o.weights_scale = 2.5f;
  Router r(o);
  const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
  const float bias[4] = {-1.0f, 0.0f, 0.5f, 0.0f};
  // Selection: s + b = {0.881 - 1, 0.731, 0.5 + 0.5, 0.269}: experts 2 then 1.
  int32_t experts[2];
  float weights[2];
  r.route(logits, bias, experts, weights);
  EXPECT_EQ(experts[0], 2);
  EXPECT_EQ(experts[1], 1);
  const float s2 = sigmoid(0.0f), s1 = sigmoid(1.0f);
  EXPECT_NEAR(weights[0], 2.5f * s2 / (s1 + s2), 1e-6);
  EXPECT_NEAR(weights[1], 2.5f * s1 / (s1 + s2), 1e-6);
}

// Grouped choice by hand: 8 experts in 4 groups of 2, 2 groups used, 3 experts chosen.
// Selection scores (bias 0, so the sigmoids) by group:
//   g0 {0.9, 0.1} -> 1.0   g1 {0.8, 0.7} -> 1.5   g2 {0.95, 0.0} -> 0.95   g3 {0.6, 0.6} -> 1.2
// Best groups: g1 (1.5) and g3 (1.2). Expert 4 (0.95, the best single score) is in g2 and
// cannot be chosen; nor expert 0 (0.9, g0). Chosen: 2 (0.8), 3 (0.7), then 6 and 7 tie at
// 0.6: the lower id, 6.
TEST(Router, GroupedChoiceByHand) {
  RouterOptions o;
  o.n_expert = 8;
  o.n_used = 3;
  o.gating = Gating::kSigmoid;
  o.n_group = 4;
  o.n_group_used = 2;
  Router r(o);
  const float want[8] = {0.9f, 0.1f, 0.8f, 0.7f, 0.95f, 0.0001f, 0.6f, 0.6f};
  float logits[8];
  for (int e = 0; e < 8; ++e) logits[e] = std::log(want[e] / (1 - want[e]));  // sigmoid^-1
  int32_t experts[3];
  float weights[3];
  r.route(logits, nullptr, experts, weights);
  EXPECT_EQ(experts[0], 2);
  EXPECT_EQ(experts[1], 3);
  EXPECT_EQ(experts[2], 6);
  EXPECT_NEAR(weights[0], 0.8f / 2.1f, 1e-5);
  EXPECT_NEAR(weights[1], 0.7f / 2.1f, 1e-5);
  EXPECT_NEAR(weights[2], 0.6f / 2.1f, 1e-5);
}

// DeepSeek V3's shape: 256 experts in 8 groups of 32, 4 groups used, 8 experts: a group
// with one very good expert and a poor second loses to groups of two good ones, and the
// bias moves whole groups.
TEST(Router, GroupsScoreTheirBestTwo) {
  RouterOptions o;
  o.n_expert = 256;
  o.n_used = 8;
  o.gating = Gating::kSigmoid;
  o.n_group = 8;
  o.n_group_used = 4;
  Router r(o);
  std::vector<float> logits(256, -5.0f), bias(256, 0.0f);
  // Group 0: one expert at 0.99, its second at sigmoid(-5): score 1.0.
  logits[0] = std::log(0.99f / 0.01f);
  // Groups 1-4: two experts at 0.7 each (score 1.4).
  for (int g = 1; g <= 4; ++g) logits[g * 32] = logits[g * 32 + 1] = std::log(0.7f / 0.3f);
  int32_t experts[8];
  float weights[8];
  r.route(logits.data(), bias.data(), experts, weights);
  for (int j = 0; j < 8; ++j) {
    EXPECT_GE(experts[j], 32) << j;  // group 0 lost
    EXPECT_LT(experts[j], 160) << j;
  }
  // A bias of +1 on group 7's first expert (sigmoid 0.5) lifts that group above the others
  // (0.5 + 1 + sigmoid(-5) > 1.4): expert 224 is chosen first, but its weight is its plain
  // sigmoid, without the bias.
  bias[224] = 1.0f;
  logits[224] = std::log(0.5f / 0.5f);
  r.route(logits.data(), bias.data(), experts, weights);
  EXPECT_EQ(experts[0], 224);
  float sum = 0;
  for (int j = 0; j < 8; ++j) sum += sigmoid(logits[static_cast<size_t>(experts[j])]);
  EXPECT_NEAR(weights[0], 0.5f / sum, 1e-5);
}

// DeepSeek V4: sqrt(softplus) probabilities, chosen with the selection bias, weighted
// without it, renormalised and scaled; a hash-routed layer's experts come from its table and
// are weighted the same way.
TEST(Router, SqrtSoftplusAndFixedExperts) {
  RouterOptions o;
  o.n_expert = 4;
  o.n_used = 2;
  o.gating = Gating::kSqrtSoftplus;
  o.weights_scale = 1.5f;
  Router r(o);
  const float logits[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  const float bias[4] = {0.0f, 5.0f, 0.0f, 0.0f};
  auto p = [&](int e) { return std::sqrt(std::log1p(std::exp(static_cast<double>(logits[e])))); };
  int32_t experts[2];
  float weights[2];
  r.route(logits, bias, experts, weights);
  EXPECT_EQ(experts[0], 1);  // chosen for its bias
  EXPECT_EQ(experts[1], 3);
  EXPECT_NEAR(weights[0], 1.5 * p(1) / (p(1) + p(3)), 1e-6);
  EXPECT_NEAR(weights[1], 1.5 * p(3) / (p(1) + p(3)), 1e-6);
  const int32_t fixed[2] = {2, 0};
  r.route(logits, bias, experts, weights, fixed);
  EXPECT_EQ(experts[0], 2);
  EXPECT_EQ(experts[1], 0);
  EXPECT_NEAR(weights[0], 1.5 * p(2) / (p(2) + p(0)), 1e-6);
  EXPECT_NEAR(weights[1], 1.5 * p(0) / (p(2) + p(0)), 1e-6);
}

}  // namespace
}  // namespace herd::engine
