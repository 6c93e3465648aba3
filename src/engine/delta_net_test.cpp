#include "engine/delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace herd::engine {
namespace {

constexpr int64_t kNk = 2, kNv = 4, kDk = 16, kDv = 32, kKernel = 4;

struct Token {
  int32_t seq, pos;
  std::vector<float> qkv, z, b, alpha;  // the projections
};

struct Weights {
  std::vector<float> conv, dt_bias, a, norm;  // conv: [kernel][conv_dim]
  std::vector<int32_t> k_head;
};

// The layer written from the model description in plain double loops, one sequence at a
// time from its first token: returns out [value_dim] of each of its tokens.
std::vector<std::vector<double>> reference(const DeltaNetDims& d, const Weights& w,
                                           const std::vector<const Token*>& seq) {
  const int64_t conv_dim = d.conv_dim();
  std::vector<std::vector<double>> state(kNv, std::vector<double>(kDk * kDv, 0.0));
  std::vector<std::vector<double>> outs;
  for (size_t t = 0; t < seq.size(); ++t) {
    std::vector<double> c(static_cast<size_t>(conv_dim));
    for (int64_t ch = 0; ch < conv_dim; ++ch) {
      double sum = 0;
      for (int64_t j = 0; j < kKernel; ++j) {
        const int64_t src = static_cast<int64_t>(t) - kKernel + 1 + j;
        if (src >= 0) sum += double(w.conv[j * conv_dim + ch]) * seq[src]->qkv[ch];
      }
      c[ch] = sum / (1 + std::exp(-sum));
    }
    for (int64_t h = 0; h < 2 * kNk; ++h) {  // q and k heads: L2 norm
      double norm = 0;
      for (int64_t i = 0; i < kDk; ++i) norm += c[h * kDk + i] * c[h * kDk + i];
      norm = std::max(std::sqrt(norm), 1e-6);
      for (int64_t i = 0; i < kDk; ++i) c[h * kDk + i] /= norm;
    }
    std::vector<double> out(kNv * kDv);
    for (int64_t j = 0; j < kNv; ++j) {
      const Token& tok = *seq[t];
      const double beta = 1 / (1 + std::exp(-double(tok.b[j])));
      const double g = std::log1p(std::exp(double(tok.alpha[j]) + w.dt_bias[j])) * w.a[j];
      const double* q = c.data() + w.k_head[j] * kDk;
      const double* k = c.data() + (kNk + w.k_head[j]) * kDk;
      const double* v = c.data() + 2 * kNk * kDk + j * kDv;
      auto& S = state[j];  // S[i][m]: key dim i -> value dim m
      for (double& s : S) s *= std::exp(g);
      for (int64_t m = 0; m < kDv; ++m) {
        double sk = 0;
        for (int64_t i = 0; i < kDk; ++i) sk += S[i * kDv + m] * k[i];
        const double u = beta * (v[m] - sk);
        for (int64_t i = 0; i < kDk; ++i) S[i * kDv + m] += k[i] * u;
      }
      double* o = out.data() + j * kDv;
      double ms = 0;
      for (int64_t m = 0; m < kDv; ++m) {
        o[m] = 0;
        for (int64_t i = 0; i < kDk; ++i) o[m] += S[i * kDv + m] * q[i] / std::sqrt(double(kDk));
        ms += o[m] * o[m];
      }
      const double inv = 1 / std::sqrt(ms / kDv + d.rms_eps);
      for (int64_t m = 0; m < kDv; ++m) {
        const double z = tok.z[j * kDv + m];
        o[m] = o[m] * inv * w.norm[m] * z / (1 + std::exp(-z));
      }
    }
    outs.push_back(out);
  }
  return outs;
}

// Three batches of two sequences through delta_net_mix against the reference: a prompt of 20
// tokens (the chunked kernel) beside a short one, decode-sized runs, and a batch where one
// slot has two runs. Both V -> K head orders (grouped: V head j reads K head j / 2, tiled:
// j % 2).
TEST(DeltaNetMix, MatchesTheLayerWrittenOut) {
  const DeltaNetDims d{kNk, kNv, kDk, kDv, kKernel, 1e-6f};
  const int64_t conv_dim = d.conv_dim();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = scale * normal(rng);
    return v;
  };
  Weights w;
  w.conv = draw(kKernel * conv_dim, 0.5f);
  w.dt_bias = draw(kNv, 0.5f);
  w.a = {-1.0f, -2.5f, -4.0f, -8.0f};
  w.norm = draw(kDv, 0.1f);
  for (float& x : w.norm) x += 1.0f;

  const std::vector<std::vector<std::pair<int32_t, int32_t>>> batches = {
      {{0, 0},  {0, 1},  {0, 2},  {0, 3},  {0, 4},  {0, 5},  {0, 6},  {0, 7},
       {0, 8},  {0, 9},  {0, 10}, {0, 11}, {0, 12}, {0, 13}, {0, 14}, {0, 15},
       {0, 16}, {0, 17}, {0, 18}, {0, 19}, {1, 0},  {1, 1},  {1, 2}},
      {{1, 3}, {0, 20}, {0, 21}, {0, 22}},
      {{0, 23}, {1, 4}, {0, 24}}};
  for (bool tiled : {false, true}) {
    w.k_head.clear();
    for (int32_t j = 0; j < kNv; ++j) w.k_head.push_back(tiled ? j % kNk : j / (kNv / kNk));
    const DeltaNetWeights dw{w.conv.data(), w.dt_bias.data(), w.a.data(), w.norm.data(),
                             w.k_head.data()};
    CacheLayout layout;
    layout.layers = {{.kind = LayerCache::kRecurrent}};
    layout.n_seq = 2;
    layout.recurrent = d.state_shape();
    KvCache cache(layout);
    ThreadPool pool(3);
    DeltaNetScratch scratch;
    std::map<int32_t, std::vector<Token>> tokens;  // per slot, every token so far
    std::map<int32_t, std::vector<std::vector<float>>> got;
    for (const auto& spec : batches) {
      Batch batch;
      std::vector<float> qkv, z, b, alpha;
      for (auto [seq, pos] : spec) {
        batch.add(1, seq, pos, true);
        Token tok{seq,
                  pos,
                  draw(conv_dim, 1.0f),
                  draw(d.value_dim(), 1.0f),
                  draw(kNv, 1.0f),
                  draw(kNv, 1.0f)};
        for (auto [dst, src] :
             {std::pair{&qkv, &tok.qkv}, {&z, &tok.z}, {&b, &tok.b}, {&alpha, &tok.alpha}}) {
          dst->insert(dst->end(), src->begin(), src->end());
        }
        tokens[seq].push_back(std::move(tok));
      }
      std::vector<float> out(static_cast<size_t>(batch.size() * d.value_dim()));
      scratch.reserve(d, batch.size(), pool.size());
      cache.begin_recurrent(batch);
      delta_net_mix(d, dw, batch, 0, cache,
                    {qkv.data(), z.data(), b.data(), alpha.data(), out.data()},
                    kernels::best_isa(kernels::detect_cpu()), scratch, pool);
      cache.end_recurrent(batch);
      for (int64_t t = 0; t < batch.size(); ++t) {
        got[batch.seq[t]].emplace_back(out.begin() + t * d.value_dim(),
                                       out.begin() + (t + 1) * d.value_dim());
      }
    }
    for (auto& [seq, toks] : tokens) {
      std::vector<const Token*> ptrs;
      for (const Token& t : toks) ptrs.push_back(&t);
      const auto want = reference(d, w, ptrs);
      ASSERT_EQ(got[seq].size(), want.size());
      for (size_t t = 0; t < want.size(); ++t) {
        for (size_t i = 0; i < want[t].size(); ++i) {
          ASSERT_NEAR(got[seq][t][i], want[t][i], 1e-4 * (1 + std::fabs(want[t][i])))
              << (tiled ? "tiled" : "grouped") << " slot " << seq << " token " << t << " value "
              << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace herd::engine
