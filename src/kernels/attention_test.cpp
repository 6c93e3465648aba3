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

// The kernels for keys and values of different sizes on `isa`: attend_kernel's choice and,
// where it is another, the ISA's attend_wide (which arm64 uses, and attend_lanes falls back
// to when values are not the keys).
std::vector<AttendFn> wide_kernels(Isa isa, int64_t k_dim, int64_t v_dim) {
  std::vector<AttendFn> fns = {attend_kernel(isa, k_dim, v_dim)};
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) fns.push_back(avx512::attend_wide);
  if (isa == Isa::kAvx2) fns.push_back(avx2::attend_wide);
#endif
  fns.push_back(&scalar::attend);  // with `partial`
  return fns;
}

// The wide kernels (MLA: keys of 576, values the first 512 of the same row) against the
// scalar one, for 1-16 heads sharing the latent (runs of every length), positions that end
// off a block of 32, with and without sinks, and scales small and large (the large one
// moves a head's maximum from block to block, so the online softmax rescales).
TEST(Attention, WideSimdMatchesScalar) {
  const CpuFeatures cpu = detect_cpu();
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (best_isa(cpu, isa) != isa) continue;
    for (auto [k_dim, v_dim] : {std::pair<int64_t, int64_t>{576, 512}, {80, 64}, {48, 48 * 6}}) {
      for (int64_t n_q : {1, 3, 4, 5, 7, 8, 9, 16, 20}) {
        for (int64_t n_pos : {1, 2, 33, 100, 257}) {
          const bool with_sinks = (n_q + n_pos) % 2 == 1;
          const float scale = n_pos % 3 == 0 ? 0.5f : 0.05f;
          const int64_t stride = std::max(k_dim, v_dim) + 16;
          std::vector<float> q(static_cast<size_t>(n_q * k_dim)), sinks(static_cast<size_t>(n_q));
          std::vector<uint16_t> rows(static_cast<size_t>(n_pos * stride));
          for (float& x : q) x = normal(rng);
          for (float& x : sinks) x = 2 * normal(rng);
          for (uint16_t& x : rows) x = fp32_to_fp16(normal(rng));
          std::vector<float> scores(static_cast<size_t>(n_q * n_pos)),
              want(static_cast<size_t>(n_q * v_dim)), got(want.size());
          AttendArgs args{q.data(),      n_q,
                          rows.data(),   rows.data(),
                          stride,        n_pos,
                          k_dim,         v_dim,
                          scale,         with_sinks ? sinks.data() : nullptr,
                          scores.data(), want.data()};
          scalar::attend(args);
          scores.resize(static_cast<size_t>(attend_scratch_floats(n_q, n_pos, k_dim, v_dim)));
          args.scores = scores.data();
          for (AttendFn fn : wide_kernels(isa, k_dim, v_dim)) {
            args.out = got.data();
            fn(args);
            for (size_t d = 0; d < got.size(); ++d) {
              EXPECT_NEAR(got[d], want[d], 2e-5 * (1 + std::fabs(want[d])))
                  << isa_name(isa) << " " << k_dim << "/" << v_dim << " n_q " << n_q << " n_pos "
                  << n_pos << " scale " << scale << " sinks " << with_sinks << " at " << d;
            }
            // The same positions in three chunks (the last may be empty of whole blocks),
            // each with `partial`, merged.
            if (n_pos < 3) continue;
            const int64_t cut[4] = {0, n_pos / 3, n_pos / 3 + 1, n_pos};
            std::vector<float> partials(static_cast<size_t>(3 * n_q * 2)),
                outs(static_cast<size_t>(3 * n_q * v_dim));
            for (int64_t c = 0; c < 3; ++c) {
              AttendArgs chunk = args;
              chunk.keys = chunk.values = rows.data() + cut[c] * stride;
              chunk.n_pos = cut[c + 1] - cut[c];
              chunk.out = outs.data() + c * n_q * v_dim;
              chunk.partial = partials.data() + c * n_q * 2;
              fn(chunk);
            }
            std::fill(got.begin(), got.end(), 0.0f);
            merge_attention(partials.data(), outs.data(), 3, n_q, v_dim, args.sinks, got.data());
            for (size_t d = 0; d < got.size(); ++d) {
              EXPECT_NEAR(got[d], want[d], 2e-5 * (1 + std::fabs(want[d])))
                  << "merged " << isa_name(isa) << " " << k_dim << "/" << v_dim << " n_q " << n_q
                  << " n_pos " << n_pos << " at " << d;
            }
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
