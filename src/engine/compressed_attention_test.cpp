#include "engine/compressed_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "quant/float16.h"

namespace herd::engine {
namespace {

using kernels::PackedMatrix;
using Mat = std::vector<float>;  // [rows][cols] row-major

struct Dims {
  int64_t e = 16, nh = 2, d = 16, q_lora = 8, window = 3, top_k = 2, hi = 2, di = 8;
  int64_t n_group = 2, o_lora = 4;
};

Mat random_mat(std::mt19937& rng, int64_t n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  Mat m(static_cast<size_t>(n));
  for (float& x : m) x = dist(rng);
  return m;
}

// y = W x for a [rows][cols] matrix, in double.
std::vector<double> apply(const Mat& w, int64_t rows, int64_t cols, const std::vector<double>& x) {
  std::vector<double> y(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r] += double(w[r * cols + c]) * x[c];
  }
  return y;
}

void norm(std::vector<double>& x, const float* w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1 / std::sqrt(ss / double(x.size()) + 1e-6);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= inv * (w ? w[i] : 1.0f);
}

void rope_last(std::vector<double>& x, size_t at, int64_t d, const Rope& rope, int64_t pos,
               bool inverse) {
  float c[64], s[64];
  rope_angles(rope, pos, c, s);
  for (int64_t i = 0; i < rope.n_rot / 2; ++i) {
    const size_t a = at + d - rope.n_rot + 2 * i;
    const double sn = inverse ? -s[i] : s[i];
    const double x0 = x[a], x1 = x[a + 1];
    x[a] = x0 * c[i] - x1 * sn;
    x[a + 1] = x0 * sn + x1 * c[i];
  }
}

double f16(double v) {
  return fp16_to_fp32(fp32_to_fp16(static_cast<float>(v)));
}

struct Layer {
  Mat wq_a, q_a_norm, wq_b, wkv, kv_norm, sinks, wo_a, wo_b;
  Mat c_kv, c_gate, c_ape, c_norm, i_q_b, i_proj, i_kv, i_gate, i_ape, i_norm;
};

// The sublayer by its formulas, for one sequence at positions 0 .. n-1.
std::vector<double> direct(const Dims& z, const CompressedAttentionOptions& o, const Layer& w,
                           const Mat& u) {
  const int64_t n = static_cast<int64_t>(u.size()) / z.e, d = z.d;
  std::vector<std::vector<double>> q(n), kv(n), qr(n), entries, ikeys;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> ut(u.begin() + t * z.e, u.begin() + (t + 1) * z.e);
    qr[t] = apply(w.wq_a, z.q_lora, z.e, ut);
    norm(qr[t], w.q_a_norm.data());
    q[t] = apply(w.wq_b, z.nh * d, z.q_lora, qr[t]);
    for (int64_t h = 0; h < z.nh; ++h) {
      std::vector<double> qh(q[t].begin() + h * d, q[t].begin() + (h + 1) * d);
      norm(qh, nullptr);
      std::copy(qh.begin(), qh.end(), q[t].begin() + h * d);
      rope_last(q[t], h * d, d, o.rope, t, false);
    }
    kv[t] = apply(w.wkv, d, z.e, ut);
    norm(kv[t], w.kv_norm.data());
    rope_last(kv[t], 0, d, o.rope, t, false);
  }
  // Compressed entries of one compressor, all blocks.
  auto compress = [&](const Mat& wk, const Mat& wg, const Mat& ape, const Mat& nw, int64_t hd,
                      bool overlap, bool hadamard) {
    const int64_t width = overlap ? 2 * hd : hd;
    std::vector<std::vector<double>> ck(n), cs(n), out;
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> ut(u.begin() + t * z.e, u.begin() + (t + 1) * z.e);
      ck[t] = apply(wk, width, z.e, ut);
      cs[t] = apply(wg, width, z.e, ut);
      for (int64_t i = 0; i < width; ++i) cs[t][i] += ape[(t % o.ratio) * width + i];
    }
    for (int64_t b = 0; (b + 1) * o.ratio <= n; ++b) {
      std::vector<float> e(hd);
      for (int64_t c = 0; c < hd; ++c) {
        std::vector<std::pair<double, double>> src;  // (score, value)
        if (overlap && b > 0) {
          for (int64_t t = (b - 1) * o.ratio; t < b * o.ratio; ++t)
            src.push_back({cs[t][c], ck[t][c]});
        }
        const int64_t col = overlap ? hd + c : c;
        for (int64_t t = b * o.ratio; t < (b + 1) * o.ratio; ++t)
          src.push_back({cs[t][col], ck[t][col]});
        double mx = -1e300, sum = 0, acc = 0;
        for (auto [s, v] : src) mx = std::max(mx, s);
        for (auto [s, v] : src) {
          sum += std::exp(s - mx);
          acc += std::exp(s - mx) * v;
        }
        e[c] = static_cast<float>(acc / sum);
      }
      compressed_finish(e.data(), hd, nw.data(), 1e-6f, o.compressed_rope, b * o.ratio, hadamard);
      out.emplace_back(e.begin(), e.end());
      for (double& v : out.back()) v = f16(v);
    }
    return out;
  };
  if (o.ratio > 0) entries = compress(w.c_kv, w.c_gate, w.c_ape, w.c_norm, d, o.indexed, false);
  if (o.indexed) ikeys = compress(w.i_kv, w.i_gate, w.i_ape, w.i_norm, z.di, true, true);
  std::vector<double> out;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<std::vector<double>> keys;
    for (int64_t p = std::max<int64_t>(0, t - z.window + 1); p <= t; ++p) keys.push_back(kv[p]);
    const int64_t visible = o.ratio > 0 ? (t + 1) / o.ratio : 0;
    std::vector<int64_t> chosen(visible);
    std::iota(chosen.begin(), chosen.end(), 0);
    if (o.indexed) {
      std::vector<double> ut(u.begin() + t * z.e, u.begin() + (t + 1) * z.e);
      std::vector<double> qi = apply(w.i_q_b, z.hi * z.di, z.q_lora, qr[t]);
      std::vector<double> wi = apply(w.i_proj, z.hi, z.e, ut);
      std::vector<double> score(visible);
      for (int64_t h = 0; h < z.hi; ++h) {
        rope_last(qi, h * z.di, z.di, o.compressed_rope, t, false);
        std::vector<float> qh(qi.begin() + h * z.di, qi.begin() + (h + 1) * z.di);
        hadamard_transform(qh.data(), z.di);
        for (int64_t b = 0; b < visible; ++b) {
          double dot = 0;
          for (int64_t i = 0; i < z.di; ++i) dot += qh[i] * ikeys[b][i];
          score[b] += wi[h] / std::sqrt(double(z.hi * z.di)) * std::max(dot, 0.0);
        }
      }
      std::stable_sort(chosen.begin(), chosen.end(),
                       [&](int64_t a, int64_t b) { return score[a] > score[b]; });
      chosen.resize(std::min<int64_t>(visible, z.top_k));
    }
    for (int64_t b : chosen) keys.push_back(entries[b]);
    std::vector<double> o_t(z.nh * d);
    for (int64_t h = 0; h < z.nh; ++h) {
      std::vector<double> logit;
      double mx = w.sinks[h];
      for (const auto& k : keys) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += f16(q[t][h * d + i]) * f16(k[i]);
        logit.push_back(dot / std::sqrt(double(d)));
        mx = std::max(mx, logit.back());
      }
      double sum = std::exp(w.sinks[h] - mx);
      for (double& l : logit) sum += (l = std::exp(l - mx));
      for (size_t j = 0; j < keys.size(); ++j) {
        for (int64_t i = 0; i < d; ++i) o_t[h * d + i] += logit[j] / sum * f16(keys[j][i]);
      }
      rope_last(o_t, h * d, d, o.rope, t, true);
    }
    const int64_t group = z.nh * d / z.n_group;
    std::vector<double> oa;
    for (int64_t g = 0; g < z.n_group; ++g) {
      std::vector<double> in(o_t.begin() + g * group, o_t.begin() + (g + 1) * group);
      Mat block(w.wo_a.begin() + g * z.o_lora * group, w.wo_a.begin() + (g + 1) * z.o_lora * group);
      auto y = apply(block, z.o_lora, group, in);
      oa.insert(oa.end(), y.begin(), y.end());
    }
    auto y = apply(w.wo_b, z.e, z.n_group * z.o_lora, oa);
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

PackedMatrix pack(const Mat& m, int64_t rows, int64_t cols) {
  return kernels::pack_matrix(
      {TensorType::F32, rows, cols, reinterpret_cast<const uint8_t*>(m.data())},
      kernels::Isa::kScalar);
}

struct Case {
  int64_t ratio;
  bool indexed;
};

class CompressedAttentionTest : public ::testing::TestWithParam<Case> {};

// Two sequences through the sublayer, interleaved in batches of three tokens each, against
// the formulas run on each sequence alone.
TEST_P(CompressedAttentionTest, MatchesTheFormulas) {
  const Dims z;
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.ratio * 10 + c.indexed));
  CompressedAttentionOptions o;
  o.n_embd = z.e;
  o.n_head = z.nh;
  o.head_dim = z.d;
  o.q_lora = z.q_lora;
  o.window = z.window;
  o.ratio = c.ratio;
  o.indexed = c.indexed;
  o.top_k = z.top_k;
  o.indexer_heads = z.hi;
  o.indexer_dim = z.di;
  o.n_group = z.n_group;
  o.o_lora = z.o_lora;
  o.rope.n_rot = 4;
  o.rope.base = 100;
  o.compressed_rope.n_rot = 4;
  o.compressed_rope.base = 1000;
  const int64_t e = z.e, d = z.d, width = c.indexed ? 2 * d : d;
  const float s = 1.0f / std::sqrt(float(e));
  Layer w;
  w.wq_a = random_mat(rng, z.q_lora * e, s);
  w.q_a_norm = random_mat(rng, z.q_lora, 0.1f);
  for (float& v : w.q_a_norm) v += 1;
  w.wq_b = random_mat(rng, z.nh * d * z.q_lora, 0.35f);
  w.wkv = random_mat(rng, d * e, s);
  w.kv_norm = w.q_a_norm;
  w.kv_norm.resize(d, 1.0f);
  w.sinks = random_mat(rng, z.nh, 1.0f);
  w.wo_a = random_mat(rng, z.n_group * z.o_lora * (z.nh * d / z.n_group), 0.2f);
  w.wo_b = random_mat(rng, e * z.n_group * z.o_lora, 0.35f);
  w.c_kv = random_mat(rng, width * e, s);
  w.c_gate = random_mat(rng, width * e, s);
  w.c_ape = random_mat(rng, std::max<int64_t>(c.ratio, 1) * width, 0.5f);
  w.c_norm = std::vector<float>(d, 1.1f);
  w.i_q_b = random_mat(rng, z.hi * z.di * z.q_lora, 0.35f);
  w.i_proj = random_mat(rng, z.hi * e, s);
  w.i_kv = random_mat(rng, 2 * z.di * e, s);
  w.i_gate = random_mat(rng, 2 * z.di * e, s);
  w.i_ape = random_mat(rng, std::max<int64_t>(c.ratio, 1) * 2 * z.di, 0.5f);
  w.i_norm = std::vector<float>(z.di, 0.9f);
  std::vector<PackedMatrix> wo_a;
  const int64_t group = z.nh * d / z.n_group;
  for (int64_t g = 0; g < z.n_group; ++g) {
    wo_a.push_back(kernels::pack_matrix(
        {TensorType::F32, z.o_lora, group,
         reinterpret_cast<const uint8_t*>(w.wo_a.data() + g * z.o_lora * group)},
        kernels::Isa::kScalar));
  }
  const PackedMatrix wq_a = pack(w.wq_a, z.q_lora, e), wq_b = pack(w.wq_b, z.nh * d, z.q_lora),
                     wkv = pack(w.wkv, d, e), wo_b = pack(w.wo_b, e, z.n_group * z.o_lora),
                     c_kv = pack(w.c_kv, width, e), c_gate = pack(w.c_gate, width, e),
                     i_q_b = pack(w.i_q_b, z.hi * z.di, z.q_lora), i_proj = pack(w.i_proj, z.hi, e),
                     i_kv = pack(w.i_kv, 2 * z.di, e), i_gate = pack(w.i_gate, 2 * z.di, e);
  CompressedAttentionWeights v;
  v.wq_a = &wq_a;
  v.wq_b = &wq_b;
  v.wkv = &wkv;
  v.wo_b = &wo_b;
  v.wo_a = &wo_a;
  v.q_a_norm = w.q_a_norm.data();
  v.kv_norm = w.kv_norm.data();
  v.sinks = w.sinks.data();
  v.comp_kv = &c_kv;
  v.comp_gate = &c_gate;
  v.comp_ape = w.c_ape.data();
  v.comp_norm = w.c_norm.data();
  v.idx_q_b = &i_q_b;
  v.idx_proj = &i_proj;
  v.idx_comp_kv = &i_kv;
  v.idx_comp_gate = &i_gate;
  v.idx_comp_ape = w.i_ape.data();
  v.idx_comp_norm = w.i_norm.data();

  const int64_t n = 21;  // five blocks of 4, two of 8 (and a partial one)
  const Mat u0 = random_mat(rng, n * e, 1.0f), u1 = random_mat(rng, n * e, 1.0f);
  CompressedCacheShape shape;
  shape.n_seq = 2;
  shape.n_ctx = 32;
  shape.window = z.window;
  shape.head_dim = d;
  shape.indexer_dim = z.di;
  shape.layers = {{0, false}, {c.ratio, c.indexed}};
  CompressedKvCache cache(shape);
  CompressedAttentionScratch scratch;
  ThreadPool pool(2);
  kernels::Workspace ws;
  const kernels::AttendFn attend = kernels::attend_kernel(kernels::Isa::kScalar, d, d);
  std::vector<double> got0, got1;
  for (int64_t t0 = 0; t0 < n; t0 += 3) {
    Batch batch;
    Mat u;
    for (int64_t t = t0; t < std::min(n, t0 + 3); ++t) {
      for (int seq = 0; seq < 2; ++seq) {
        batch.add(0, seq, static_cast<int32_t>(t), true);
        const Mat& src = seq == 0 ? u0 : u1;
        u.insert(u.end(), src.begin() + t * e, src.begin() + (t + 1) * e);
      }
    }
    scratch.reserve(o, cache.n_entries(1), batch.size(), pool.size());
    std::vector<float> out(batch.size() * e);
    compressed_attention(o, v, batch, u.data(), cache, 1, scratch, attend, pool, ws, out.data());
    for (int64_t t = 0; t < batch.size(); ++t) {
      auto& dst = batch.seq[t] == 0 ? got0 : got1;
      dst.insert(dst.end(), out.begin() + t * e, out.begin() + (t + 1) * e);
    }
  }
  const std::vector<double> want0 = direct(z, o, w, u0), want1 = direct(z, o, w, u1);
  ASSERT_EQ(got0.size(), want0.size());
  for (size_t i = 0; i < want0.size(); ++i) {
    EXPECT_NEAR(got0[i], want0[i], 2e-4) << "token " << i / e;
    EXPECT_NEAR(got1[i], want1[i], 2e-4) << "token " << i / e;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CompressedAttentionTest,
                         ::testing::Values(Case{0, false}, Case{8, false}, Case{4, true}),
                         [](const auto& info) {
                           return info.param.ratio == 0 ? std::string("Window")
                                  : info.param.indexed  ? std::string("Sparse")
                                                        : std::string("Heavy");
                         });

}  // namespace
}  // namespace herd::engine
