#include "engine/compressor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/compressed_kv_cache.h"
#include "util/error.h"

namespace herd::engine {
namespace {

std::vector<float> random_vector(std::mt19937& rng, size_t n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// rows[p]: the kv and score rows of position p, written into the ring as a sequence would.
struct Rows {
  std::vector<std::vector<float>> kv, score;
};

Rows fill_ring(std::mt19937& rng, const CompressorShape& s, int64_t n_pos,
               std::vector<float>& kv_ring, std::vector<float>& score_ring) {
  Rows rows;
  kv_ring.assign(s.ring_rows() * s.width(), 0);
  score_ring.assign(s.ring_rows() * s.width(), 0);
  for (int64_t p = 0; p < n_pos; ++p) {
    rows.kv.push_back(random_vector(rng, s.width(), 1.0f));
    rows.score.push_back(random_vector(rng, s.width(), 2.0f));
    const int64_t r = p % s.ring_rows();
    std::copy(rows.kv[p].begin(), rows.kv[p].end(), kv_ring.begin() + r * s.width());
    std::copy(rows.score[p].begin(), rows.score[p].end(), score_ring.begin() + r * s.width());
  }
  return rows;
}

// The softmax-weighted sum over (position, column) sources, in double.
double weighted(const Rows& rows, const std::vector<std::pair<int64_t, int64_t>>& src) {
  double mx = -1e30, sum = 0, acc = 0;
  for (auto [p, c] : src) mx = std::max(mx, double(rows.score[p][c]));
  for (auto [p, c] : src) {
    const double w = std::exp(rows.score[p][c] - mx);
    sum += w;
    acc += w * rows.kv[p][c];
  }
  return acc / sum;
}

TEST(Compressor, HeavyBlocksSumTheirOwnTokens) {
  std::mt19937 rng(1);
  const CompressorShape s{8, 16, false};
  std::vector<float> kv, score;
  const Rows rows = fill_ring(rng, s, 24, kv, score);  // the ring holds block 2 only
  EXPECT_TRUE(s.completes_block(23));
  EXPECT_EQ(s.visible(22), 2);
  EXPECT_EQ(s.visible(23), 3);
  std::vector<float> out(16);
  compress_block(s, kv.data(), score.data(), 2, out.data());
  for (int64_t c = 0; c < 16; ++c) {
    std::vector<std::pair<int64_t, int64_t>> src;
    for (int64_t t = 16; t < 24; ++t) src.push_back({t, c});
    EXPECT_NEAR(out[c], weighted(rows, src), 1e-5) << c;
  }
}

TEST(Compressor, SparseBlocksOverlapThePreviousBlock) {
  std::mt19937 rng(2);
  const CompressorShape s{4, 8, true};
  EXPECT_EQ(s.width(), 16);
  EXPECT_EQ(s.ring_rows(), 8);
  std::vector<float> kv, score;
  Rows rows = fill_ring(rng, s, 4, kv, score);
  std::vector<float> out(8);
  compress_block(s, kv.data(), score.data(), 0, out.data());  // block -1 absent
  for (int64_t c = 0; c < 8; ++c) {
    std::vector<std::pair<int64_t, int64_t>> src;
    for (int64_t t = 0; t < 4; ++t) src.push_back({t, 8 + c});
    EXPECT_NEAR(out[c], weighted(rows, src), 1e-5);
  }
  rows = fill_ring(rng, s, 16, kv, score);  // ring: positions 8 .. 15
  compress_block(s, kv.data(), score.data(), 3, out.data());
  for (int64_t c = 0; c < 8; ++c) {
    std::vector<std::pair<int64_t, int64_t>> src;
    for (int64_t t = 8; t < 12; ++t) src.push_back({t, c});
    for (int64_t t = 12; t < 16; ++t) src.push_back({t, 8 + c});
    EXPECT_NEAR(out[c], weighted(rows, src), 1e-5);
  }
}

TEST(Compressor, HadamardIsTheOrthonormalSylvesterMatrix) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 2, 8, 32}) {
    const auto x = random_vector(rng, n, 1.0f);
    auto y = x;
    hadamard_transform(y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t j = 0; j < n; ++j) {
        want += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * x[j];
      }
      EXPECT_NEAR(y[i], want / std::sqrt(double(n)), 1e-5) << n << " " << i;
    }
  }
}

TEST(Compressor, FinishNormsThenRopesTheLastDims) {
  std::mt19937 rng(4);
  const int64_t d = 16;
  const auto x = random_vector(rng, d, 3.0f), norm = random_vector(rng, d, 1.0f);
  Rope rope;
  rope.n_rot = 4;
  rope.base = 100;
  auto y = x;
  compressed_finish(y.data(), d, norm.data(), 1e-6f, rope, 5, false);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double inv = 1 / std::sqrt(ss / d + 1e-6);
  for (int64_t i = 0; i < d - 4; ++i) EXPECT_NEAR(y[i], x[i] * inv * norm[i], 1e-5);
  for (int64_t k = 0; k < 2; ++k) {  // pair k of the last 4 dims, angle 5 * 100^(-2k/4)
    const double a = 5 * std::pow(100.0, -2.0 * k / 4);
    const double x0 = x[d - 4 + 2 * k] * inv * norm[d - 4 + 2 * k];
    const double x1 = x[d - 3 + 2 * k] * inv * norm[d - 3 + 2 * k];
    EXPECT_NEAR(y[d - 4 + 2 * k], x0 * std::cos(a) - x1 * std::sin(a), 1e-5);
    EXPECT_NEAR(y[d - 3 + 2 * k], x0 * std::sin(a) + x1 * std::cos(a), 1e-5);
  }
  auto h = x;  // with the Hadamard transform: norms are kept
  compressed_finish(h.data(), d, norm.data(), 1e-6f, rope, 5, true);
  double a = 0, b = 0;
  for (int64_t i = 0; i < d; ++i) {
    a += double(y[i]) * y[i];
    b += double(h[i]) * h[i];
  }
  EXPECT_NEAR(a, b, 1e-4 * a);
}

TEST(CompressedKvCache, SizesAreTheWindowTheRingsAndTheEntries) {
  CompressedCacheShape shape;
  shape.n_seq = 2;
  shape.n_ctx = 256;
  shape.window = 8;
  shape.head_dim = 64;
  shape.indexer_dim = 32;
  shape.layers = {{0, false}, {4, true}, {128, false}};
  CompressedKvCache cache(shape);
  // Per sequence: 3 windows of 8 x 64 F16; CSA: rings 8 x 128 (kv, score) F32 + 64 entries
  // of 64 F16, indexer rings 8 x 64 + 64 entries of 32; HCA: rings 128 x 64 + 2 entries of 64.
  const size_t per_seq = 3 * 8 * 64 * 2 + (2 * 8 * 128 * 4 + 64 * 64 * 2) +
                         (2 * 8 * 64 * 4 + 64 * 32 * 2) + (2 * 128 * 64 * 4 + 2 * 64 * 2);
  EXPECT_EQ(cache.bytes(), 2 * per_seq);
  EXPECT_EQ(CompressedKvCache::bytes_for(shape), cache.bytes());
  EXPECT_EQ(cache.n_entries(1), 64);
  EXPECT_EQ(cache.n_entries(2), 2);
  EXPECT_EQ(cache.raw(0, 1, 3), cache.raw(0, 1, 11));  // the window wraps
  EXPECT_NE(cache.raw(0, 0, 3), cache.raw(0, 1, 3));
  EXPECT_EQ(cache.ring_kv(1, 1, 1) - cache.ring_kv(1, 0, 1), 8 * 64);
  EXPECT_EQ(cache.entries(2, 1, 0) - cache.entries(2, 0, 0), 2 * 64);
  EXPECT_THROW(cache.ring_kv(2, 0, 1), Error);  // HCA has no indexer
  shape.window = 0;
  EXPECT_THROW(CompressedKvCache bad(shape), Error);
}

}  // namespace
}  // namespace herd::engine
