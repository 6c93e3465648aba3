#include "engine/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace herd::engine {
namespace {

TEST(Ops, RmsNormScalesToUnitRms) {
  std::vector<float> x = {1, -2, 3, -4};
  std::vector<float> w = {1, 1, 1, 2};
  std::vector<float> out(4);
  rms_norm(x.data(), w.data(), 4, 0.0f, out.data());
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  EXPECT_NEAR(out[0], 1 / rms, 1e-6);
  EXPECT_NEAR(out[3], -8 / rms, 1e-6);
}

TEST(Ops, RmsNormPlainGivesUnitRms) {
  std::vector<float> x = {3, -1, 4, -1, 5, -9, 2, 6};
  rms_norm_plain(x.data(), 8, 0.0f, x.data());
  double sum = 0;
  for (float v : x) sum += double(v) * v;
  EXPECT_NEAR(sum / 8, 1.0, 1e-6);
  EXPECT_GT(x[0], 0.0f);
}

void rope(float* x, int64_t head_dim, int64_t pos, float base, RopeStyle style,
          const float* factors) {
  float cos[64], sin[64];
  Rope r;
  r.n_rot = head_dim;
  r.base = base;
  r.freq_factors = factors;
  rope_angles(r, pos, cos, sin);
  rope_apply(x, head_dim, style, cos, sin);
}

// The frontier README's deepseek2 YaRN by hand: 16 dims, base 1e4, factor 4, original
// context 64, beta 32 / 1: correction dims [0, 3], so pair i blends theta / 4 and theta by
// r = 1, 2/3, 1/3, 0, 0, ...; DeepSeek keeps cos and sin unscaled and puts
// (1 + 0.1 ln 4)^2 on the logits. gpt-oss's (factor 32, context 4096, base 150000, 64 dims)
// has correction dims [8, 18] and cos and sin times 1 + 0.1 ln 32.
TEST(Ops, YarnBlendsScaledAndUnscaledAngles) {
  HParams hp;
  hp.n_rot = 16;
  hp.head_dim = 48;  // 32 without rope + 16 with
  hp.rope_base = 10000;
  hp.rope_scaling = RopeScaling::kYarn;
  hp.rope_factor = 4;
  hp.rope_original_ctx = 64;
  hp.yarn_log_multiplier = 0.1f;
  const ArchSpec& ds = *find_arch("deepseek2");
  const Rope r = make_rope(ds, hp, layer_options(ds, hp, 0), nullptr);
  EXPECT_EQ(r.corr_low, 0);
  EXPECT_EQ(r.corr_high, 3);
  EXPECT_EQ(r.magnitude, 1.0f);
  float cos[8], sin[8];
  const int64_t pos = 5;
  rope_angles(r, pos, cos, sin);
  const double ramp[8] = {1, 2.0 / 3, 1.0 / 3, 0, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    const double theta = pos * std::pow(10000.0, -2.0 * i / 16);
    const double want = theta / 4 * (1 - ramp[i]) + theta * ramp[i];
    EXPECT_NEAR(std::atan2(sin[i], cos[i]), std::remainder(want, 2 * M_PI), 1e-5) << i;
  }
  const double m = 1 + 0.1 * std::log(4.0);
  EXPECT_NEAR(attention_scale(ds, hp, layer_options(ds, hp, 0)), m * m / std::sqrt(48.0), 1e-6);
  EXPECT_NEAR(attention_scale(ds, hp, layer_options(ds, hp, 0)), 0.187130, 1e-6);

  HParams oss = hp;
  oss.n_rot = oss.head_dim = 64;
  oss.rope_base = 150000;
  oss.rope_factor = 32;
  oss.rope_original_ctx = 4096;
  const ArchSpec& gpt = *find_arch("gpt-oss");
  const Rope o = make_rope(gpt, oss, layer_options(gpt, oss, 0), nullptr);
  EXPECT_EQ(o.corr_low, 8);
  EXPECT_EQ(o.corr_high, 18);
  EXPECT_NEAR(o.magnitude, 1.346574, 1e-5);
  EXPECT_NEAR(attention_scale(gpt, oss, layer_options(gpt, oss, 0)), 1 / 8.0, 1e-7);
}

TEST(Ops, GatedActivations) {
  std::vector<float> x = {-1, 0, 1, 10}, up = {2, 2, 2, -20};
  std::vector<float> gelu = x;
  gelu_tanh_mul(gelu.data(), up.data(), 4);
  EXPECT_NEAR(gelu[0], -0.158808 * 2, 1e-5);
  EXPECT_NEAR(gelu[1], 0, 1e-7);
  EXPECT_NEAR(gelu[2], 0.841192 * 2, 1e-5);
  std::vector<float> oai = x;
  swiglu_oai_mul(oai.data(), up.data(), 4);
  EXPECT_NEAR(oai[2], 1 / (1 + std::exp(-1.702)) * 3, 1e-6);
  // Gate clamped to 7 from above, up to -7 from below: 7 sigmoid(11.914) (-6).
  EXPECT_NEAR(oai[3], 7 / (1 + std::exp(-1.702 * 7)) * -6, 1e-4);
}

TEST(Ops, RopeRotatesPairsByStyle) {
  // head_dim 4: pair 0 turns by pos * 1, pair 1 by pos * base^(-1/2).
  std::vector<float> adjacent = {1, 0, 1, 0};
  rope(adjacent.data(), 4, 1, 100.0f, RopeStyle::kAdjacentPairs, nullptr);
  EXPECT_NEAR(adjacent[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(adjacent[1], std::sin(1.0f), 1e-6);
  EXPECT_NEAR(adjacent[2], std::cos(0.1f), 1e-6);
  EXPECT_NEAR(adjacent[3], std::sin(0.1f), 1e-6);

  std::vector<float> neox = {1, 1, 0, 0};  // pairs (0, 2) and (1, 3)
  rope(neox.data(), 4, 1, 100.0f, RopeStyle::kNeoxHalves, nullptr);
  EXPECT_NEAR(neox[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(neox[2], std::sin(1.0f), 1e-6);
  EXPECT_NEAR(neox[1], std::cos(0.1f), 1e-6);
  EXPECT_NEAR(neox[3], std::sin(0.1f), 1e-6);

  std::vector<float> scaled = {1, 0, 1, 0};
  const float factors[2] = {2.0f, 1.0f};
  rope(scaled.data(), 4, 1, 100.0f, RopeStyle::kAdjacentPairs, factors);
  EXPECT_NEAR(scaled[1], std::sin(0.5f), 1e-6);
}

TEST(Ops, SiluMul) {
  float x[2] = {0, 2};
  const float up[2] = {5, 3};
  silu_mul(x, up, 2);
  EXPECT_FLOAT_EQ(x[0], 0);
  EXPECT_NEAR(x[1], 2 / (1 + std::exp(-2.0f)) * 3, 1e-5);
}

TEST(Ops, SiluClampClampsTheActivatedGateAndTheUp) {
  std::vector<float> g = {-3.0f, 0.5f, 4.0f, 4.0f}, u = {2.0f, -0.3f, 0.5f, -7.0f};
  auto silu = [](float v) { return v / (1 + std::exp(-v)); };
  std::vector<float> want = {silu(-3.0f) * 1.0f, silu(0.5f) * -0.3f, 1.0f * 0.5f, 1.0f * -1.0f};
  silu_clamp_mul(g.data(), u.data(), 4, 1.0f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(g[i], want[i], 1e-6) << i;
}

TEST(Ops, SqrtSoftplus) {
  std::vector<float> x = {-5.0f, 0.0f, 3.0f, 25.0f};
  sqrt_softplus(x.data(), 4);
  EXPECT_NEAR(x[0], std::sqrt(std::log1p(std::exp(-5.0))), 1e-6);
  EXPECT_NEAR(x[1], std::sqrt(std::log(2.0)), 1e-6);
  EXPECT_NEAR(x[2], std::sqrt(std::log1p(std::exp(3.0))), 1e-6);
  EXPECT_NEAR(x[3], 5.0f, 1e-6);
}

}  // namespace
}  // namespace herd::engine
