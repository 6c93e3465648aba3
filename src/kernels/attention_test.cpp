#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/float16.h"

namespace herd::kernels {
namespace {

TEST(Attention, ScalarWeighsValuesBySoftmax) {
  // Two positions, head_dim 2: q . k = {0, log 3} -> weights {1/4, 3/4}.
  const float q[2] = {1, 0};
  const uint16_t keys[4] = {fp32_to_fp16(0), 0, fp32_to_fp16(std::log(3.0f)), 0};
  const uint16_t values[4] = {fp32_to_fp16(4), fp32_to_fp16(0), fp32_to_fp16(0), fp32_to_fp16(8)};
  float scores[2], out[2];
  AttendArgs args{q, 1, keys, values, 2, 2, 2, 2, 1.0f, nullptr, scores, out};
  scalar::attend(args);
  EXPECT_NEAR(out[0], 1.0f, 1e-3);
  EXPECT_NEAR(out[1], 6.0f, 1e-2);
  // A sink logit of log 4 takes e^log4 / (1 + 3 + 4) = half of the weight, and no value.
  const float sink = std::log(4.0f);
  args.sinks = &sink;
  scalar::attend(args);
  EXPECT_NEAR(out[0], 0.5f, 1e-3);
  EXPECT_NEAR(out[1], 3.0f, 1e-2);
}

TEST(Attention, ScalarKeysLongerThanValues) {
  // MLA: the value is the first v_dim of the key row; k_dim 3, v_dim 2.
  const float q[3] = {0, 0, 1};
  const uint16_t rows[6] = {fp32_to_fp16(2), fp32_to_fp16(0), fp32_to_fp16(0),
                            fp32_to_fp16(0), fp32_to_fp16(6), fp32_to_fp16(std::log(3.0f))};
  float scores[2], out[2];
  scalar::attend({q, 1, rows, rows, 3, 2, 3, 2, 1.0f, nullptr, scores, out});
  EXPECT_NEAR(out[0], 0.5f, 1e-3);
  EXPECT_NEAR(out[1], 4.5f, 1e-2);
}

// Every SIMD attention kernel against the scalar reference on random heads.
// Every SIMD kernel against the scalar one, for one query head and for groups of heads that
// share a KV head (runs of 2-4 and a remainder: 5 = 4 + 1, 8 = 4 + 4 or 2 x 4 ...).
TEST(Attention, SimdMatchesScalar) {
  const CpuFeatures cpu = detect_cpu();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (best_isa(cpu, isa) != isa) {
      std::printf("attention: %s not available here\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    for (int64_t head_dim : {32, 64, 128, 256}) {
      for (int64_t n_q : {1, 2, 3, 4, 5, 8}) {
        for (int64_t n_pos : {1, 3, 4, 17, 100, 1000}) {
          const int64_t stride = head_dim * 3;  // other heads sit between rows, as in the cache
          std::vector<float> q(static_cast<size_t>(n_q * head_dim));
          std::vector<uint16_t> k(static_cast<size_t>(n_pos * stride)), v(k.size());
          for (float& x : q) x = normal(rng);
          for (uint16_t& x : k) x = fp32_to_fp16(normal(rng));
          for (uint16_t& x : v) x = fp32_to_fp16(normal(rng));
          std::vector<float> scores(static_cast<size_t>(n_q * n_pos)), want(q.size()),
              got(q.size());
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          std::vector<float> sinks(static_cast<size_t>(n_q));
          for (float& x : sinks) x = normal(rng);
          for (const float* sink :
               {static_cast<const float*>(nullptr), static_cast<const float*>(sinks.data())}) {
            AttendArgs args{q.data(), n_q,      k.data(), v.data(), stride,        n_pos,
                            head_dim, head_dim, scale,    sink,     scores.data(), want.data()};
            scalar::attend(args);
            AttendFn fn = attend_kernel(isa, head_dim, head_dim);
            ASSERT_NE(fn, &scalar::attend);
            args.out = got.data();
            fn(args);
            for (size_t d = 0; d < got.size(); ++d) {
              EXPECT_NEAR(got[d], want[d], 2e-5 * (1 + std::fabs(want[d])))
                  << isa_name(isa) << " head_dim " << head_dim << " n_q " << n_q << " n_pos "
                  << n_pos << " sinks " << (sink != nullptr) << " at " << d;
            }
          }
        }
      }
    }
  }
}

// The wide kernels (MLA: keys of 576, values the first 512 of the same row) against the
// scalar one, for 1-16 heads sharing the latent and positions that end off a block of 32.
TEST(Attention, WideSimdMatchesScalar) {
  const CpuFeatures cpu = detect_cpu();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (best_isa(cpu, isa) != isa) continue;
    for (auto [k_dim, v_dim] : {std::pair<int64_t, int64_t>{576, 512}, {80, 64}, {48, 48 * 6}}) {
      for (int64_t n_q : {1, 3, 4, 7, 16}) {
        for (int64_t n_pos : {1, 2, 33, 100}) {
          const int64_t stride = std::max(k_dim, v_dim) + 16;
          std::vector<float> q(static_cast<size_t>(n_q * k_dim));
          std::vector<uint16_t> rows(static_cast<size_t>(n_pos * stride));
          for (float& x : q) x = normal(rng);
          for (uint16_t& x : rows) x = fp32_to_fp16(normal(rng));
          std::vector<float> scores(static_cast<size_t>(n_q * n_pos)),
              want(static_cast<size_t>(n_q * v_dim)), got(want.size());
          AttendArgs args{q.data(), n_q,   rows.data(), rows.data(), stride,        n_pos,
                          k_dim,    v_dim, 0.05f,       nullptr,     scores.data(), want.data()};
          scalar::attend(args);
          AttendFn fn = attend_kernel(isa, k_dim, v_dim);
          ASSERT_NE(fn, &scalar::attend);
          args.out = got.data();
          fn(args);
          for (size_t d = 0; d < got.size(); ++d) {
            EXPECT_NEAR(got[d], want[d], 2e-5 * (1 + std::fabs(want[d])))
                << isa_name(isa) << " " << k_dim << "/" << v_dim << " n_q " << n_q << " n_pos "
                << n_pos << " at " << d;
          }
        }
      }
    }
  }
}

// Every SIMD SiLU product against the scalar one, across the range where e^-x over- or
// underflows in floats and with a tail shorter than a vector.
TEST(SiluMul, SimdMatchesScalar) {
  const CpuFeatures cpu = detect_cpu();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int64_t n = 16 * 20 + 13;
  std::vector<float> x(n), up(n);
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(i)] =
        i < 6 ? std::vector<float>{-200, -90, -0.0f, 0, 90, 200}[size_t(i)] : normal(rng);
    up[size_t(i)] = normal(rng);
  }
  std::vector<float> want = x;
  scalar::silu_mul(want.data(), up.data(), n);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (best_isa(cpu, isa) != isa) continue;
    SiluMulFn fn = silu_mul_kernel(isa);
    ASSERT_NE(fn, &scalar::silu_mul);
    std::vector<float> got = x;
    fn(got.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-6 * (1e-6 + std::fabs(want[size_t(i)])))
          << isa_name(isa) << " x " << x[size_t(i)];
    }
  }
}

TEST(Attention, OddHeadSizesFallBackToScalar) {
  EXPECT_EQ(attend_kernel(Isa::kAvx512, 40, 40), attend_kernel(Isa::kAvx2, 40, 40));
  EXPECT_EQ(attend_kernel(Isa::kScalar, 64, 64), &scalar::attend);
  EXPECT_EQ(attend_kernel(Isa::kAvx512, 20, 20), &scalar::attend);
  EXPECT_EQ(attend_kernel(Isa::kNeon, 30, 30), &scalar::attend);
  EXPECT_EQ(attend_kernel(Isa::kAvx512, 577, 512), &scalar::attend);
}

}  // namespace
}  // namespace herd::kernels
