// The router shader against engine/router.h's Router on random logits: softmax (Qwen3-MoE),
// sigmoid with a selection bias and grouped choice (DeepSeek V3), sqrt-softplus (DeepSeek
// V4); the same experts in the same order, the same weights.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/router.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

TEST(VulkanRouter, ChoosesTheEnginesExpertsAndWeights) {
  HERD_TEST_VULKAN_CONTEXT(context);
  struct Case {
    const char* name;
    Gating gating;
    int64_t n_expert, n_used, n_group, n_group_used;
    bool bias, norm;
    float scale;
  };
  const Case cases[] = {
      {"softmax", Gating::kSoftmax, 128, 8, 1, 1, false, true, 1.0f},
      {"softmax unnormalized", Gating::kSoftmax, 32, 4, 1, 1, false, false, 1.0f},
      {"sigmoid grouped", Gating::kSigmoid, 256, 8, 8, 4, true, true, 2.5f},
      {"sqrt-softplus", Gating::kSqrtSoftplus, 384, 6, 1, 1, true, true, 1.5f},
      {"all of few", Gating::kSoftmax, 4, 4, 1, 1, false, true, 1.0f},
  };
  const int64_t n_tokens = 7;
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(seed++);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(size_t(n_tokens * c.n_expert)), bias(size_t(c.n_expert));
    for (float& v : logits) v = normal(rng);
    for (float& v : bias) v = normal(rng) * 0.05f;

    engine::RouterOptions o;
    o.n_expert = c.n_expert;
    o.n_used = c.n_used;
    o.gating = c.gating;
    o.norm_weights = c.norm;
    o.weights_scale = c.scale;
    o.n_group = c.n_group;
    o.n_group_used = c.n_group_used;
    engine::Router router(o);
    std::vector<int32_t> want_experts(size_t(n_tokens * c.n_used));
    std::vector<float> want_weights(want_experts.size());
    for (int64_t t = 0; t < n_tokens; ++t) {
      router.route(&logits[size_t(t * c.n_expert)], c.bias ? bias.data() : nullptr,
                   &want_experts[size_t(t * c.n_used)], &want_weights[size_t(t * c.n_used)]);
    }

    Buffer b_logits(context, logits.size() * 4, BufferKind::kDevice);
    Buffer b_bias(context, bias.size() * 4, BufferKind::kDevice);
    Buffer b_experts(context, want_experts.size() * 4, BufferKind::kDevice);
    Buffer b_weights(context, want_weights.size() * 4, BufferKind::kDevice);
    upload(context, b_logits, logits.data(), logits.size() * 4);
    upload(context, b_bias, bias.data(), bias.size() * 4);
    RouterShape shape;
    shape.gating = c.gating == Gating::kSoftmax   ? RouterShape::kSoftmax
                   : c.gating == Gating::kSigmoid ? RouterShape::kSigmoid
                                                  : RouterShape::kSqrtSoftplus;
    shape.n_tokens = n_tokens;
    shape.n_expert = c.n_expert;
    shape.n_used = c.n_used;
    shape.norm_weights = c.norm;
    shape.weights_scale = c.scale;
    shape.n_group = c.n_group;
    shape.n_group_used = c.n_group_used;
    Recorder r(context);
    r.begin();
    const Binding bias_binding(b_bias);
    herd_test_device.kernels->route(r, b_logits, c.bias ? &bias_binding : nullptr, b_experts,
                                    b_weights, shape);
    r.submit_and_wait();
    std::vector<int32_t> experts(want_experts.size());
    std::vector<float> weights(want_weights.size());
    download(context, b_experts, experts.data(), experts.size() * 4);
    download(context, b_weights, weights.data(), weights.size() * 4);
    EXPECT_EQ(experts, want_experts);
    for (size_t i = 0; i < weights.size(); ++i) {
      EXPECT_NEAR(weights[i], want_weights[i], 1e-5 * (1 + std::fabs(want_weights[i]))) << i;
    }
  }
}

}  // namespace
}  // namespace herd::vulkan
