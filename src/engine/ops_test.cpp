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

void rope(float* x, int64_t head_dim, int64_t pos, float base, RopeStyle style,
          const float* factors) {
  float cos[64], sin[64];
  rope_angles(pos, head_dim, base, factors, cos, sin);
  rope_apply(x, head_dim, style, cos, sin);
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

}  // namespace
}  // namespace herd::engine
