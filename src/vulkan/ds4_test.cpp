// DeepSeek V4's shaders (kernels_ds4.cpp) against the CPU's scalar code on random data:
// hyper-connections (engine/hyper_connection.h), the Hadamard transform and the compressors
// (engine/compressor.h), the lightning indexer (engine/lightning_indexer.h), the attention
// over a window and compressed entries (kernels/attention.h's scalar attend over the same
// keys), and hash routing (engine/router.h with fixed experts).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/compressor.h"
#include "engine/hyper_connection.h"
#include "engine/lightning_indexer.h"
#include "engine/ops.h"
#include "engine/router.h"
#include "kernels/attention.h"
#include "quant/float16.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n, float sd = 1.0f) {
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

template <typename T>
Buffer device_copy(Context& context, const std::vector<T>& v) {
  Buffer b(context, std::max<size_t>(v.size() * sizeof(T), 4), BufferKind::kDevice);
  if (!v.empty()) upload(context, b, v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> read_back(Context& context, const Buffer& b, size_t n) {
  std::vector<T> v(n);
  download(context, b, v.data(), n * sizeof(T));
  return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
  }
}

TEST(VulkanDs4, HyperConnectionsMatchTheCpu) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& k = *herd_test_device.kernels;
  for (const int n_hc : {1, 4, 8}) {
    SCOPED_TRACE("streams " + std::to_string(n_hc));
    std::mt19937 rng{uint32_t(n_hc)};
    const int64_t n = 5, e = 96;
    engine::HyperOptions o;
    o.n_hc = n_hc;
    o.sinkhorn_iters = 20;
    const int64_t mixes = o.n_mixes();
    const std::vector<float> x = random_floats(rng, size_t(n * n_hc * e));
    const std::vector<float> m = random_floats(rng, size_t(n * mixes));
    const std::vector<float> scale = {1.1f, 0.9f, 1.2f}, base = random_floats(rng, size_t(mixes));
    const std::vector<float> f = random_floats(rng, size_t(n * e));
    // The CPU: weights, collapse, expand; and the head's weights and collapse.
    std::vector<float> coeffs(size_t(n * mixes)), h(size_t(n * e)), expanded = x;
    std::vector<float> head(size_t(n * e));
    for (int64_t t = 0; t < n; ++t) {
      float* wt = &coeffs[size_t(t * mixes)];
      engine::hc_weights(o, &m[size_t(t * mixes)], scale.data(), base.data(), wt, wt + n_hc,
                         wt + 2 * n_hc);
      engine::hc_collapse(&x[size_t(t * n_hc * e)], wt, n_hc, e, &h[size_t(t * e)]);
      engine::hc_expand(&f[size_t(t * e)], wt + n_hc, wt + 2 * n_hc, n_hc, e,
                        &expanded[size_t(t * n_hc * e)]);
      float pre[engine::kMaxHyperStreams];
      engine::hc_head_weights(o, &m[size_t(t * mixes)], scale.data(), base.data(), pre);
      engine::hc_collapse(&x[size_t(t * n_hc * e)], pre, n_hc, e, &head[size_t(t * e)]);
    }
    // The head reads mixes [n][n_hc]: the first n_hc of each token's.
    std::vector<float> head_mixes(size_t(n * n_hc));
    for (int64_t t = 0; t < n; ++t) {
      std::copy_n(&m[size_t(t * mixes)], n_hc, &head_mixes[size_t(t * n_hc)]);
    }
    Buffer bx = device_copy(context, x), bm = device_copy(context, m),
           bhm = device_copy(context, head_mixes), bs = device_copy(context, scale),
           bb = device_copy(context, base), bf = device_copy(context, f);
    Buffer bc(context, coeffs.size() * 4, BufferKind::kDevice);
    Buffer bh(context, h.size() * 4, BufferKind::kDevice),
        bhead(context, h.size() * 4, BufferKind::kDevice);
    HyperShape shape{n, n_hc, e, o.sinkhorn_iters, o.eps, false};
    HyperShape head_shape = shape;
    head_shape.head = true;
    Recorder r(context);
    r.begin();
    k.hc_pre(r, bx, bm, bs, bb, bc, bh, shape);
    k.hc_pre(r, bx, bhm, bs, bb, bc, bhead, head_shape);  // leaves coeffs alone
    k.hc_post(r, bf, bc, bx, shape);
    r.submit_and_wait();
    expect_near(read_back<float>(context, bc, coeffs.size()), coeffs, 1e-5);
    expect_near(read_back<float>(context, bh, h.size()), h, 1e-5);
    expect_near(read_back<float>(context, bhead, head.size()), head, 1e-5);
    expect_near(read_back<float>(context, bx, x.size()), expanded, 1e-5);
  }
}

TEST(VulkanDs4, HadamardMatchesTheCpu) {
  HERD_TEST_VULKAN_CONTEXT(context);
  for (const int64_t n : {1, 2, 32, 128, 1024}) {
    std::mt19937 rng{uint32_t(n)};
    const int64_t rows = 3;
    std::vector<float> x = random_floats(rng, size_t(rows * n)), want = x;
    for (int64_t i = 0; i < rows; ++i) engine::hadamard_transform(&want[size_t(i * n)], n);
    Buffer b = device_copy(context, x);
    Recorder r(context);
    r.begin();
    herd_test_device.kernels->hadamard(r, b, n, rows);
    r.submit_and_wait();
    expect_near(read_back<float>(context, b, x.size()), want, 1e-5);
  }
}

// Two sequences' tokens through a compressor, a batch at a time: rows, then the entries of
// the blocks each batch completes, against compress_block and compressed_finish.
TEST(VulkanDs4, CompressorsMatchTheCpu) {
  HERD_TEST_VULKAN_CONTEXT(context);
  struct Case {
    int64_t ratio, head_dim;
    bool overlap, hadamard;
  };
  for (const Case c :
       {Case{4, 64, true, false}, Case{4, 32, true, true}, Case{8, 48, false, false}}) {
    SCOPED_TRACE("ratio " + std::to_string(c.ratio) + " dim " + std::to_string(c.head_dim));
    std::mt19937 rng{uint32_t(c.ratio * c.head_dim)};
    const int64_t n_seq = 2, n_ctx = 40;
    CompressShape shape;
    shape.ratio = c.ratio;
    shape.head_dim = c.head_dim;
    shape.overlap = c.overlap;
    shape.n_ctx = n_ctx;
    shape.n_entries = (n_ctx + c.ratio - 1) / c.ratio;
    shape.n_rot = 16;
    shape.hadamard = c.hadamard;
    const int64_t width = shape.width();
    engine::Rope rope;
    rope.n_rot = 16;
    rope.base = 160000.0f;
    const std::vector<float> ape = random_floats(rng, size_t(c.ratio * width), 0.5f);
    const std::vector<float> norm = random_floats(rng, size_t(c.head_dim), 0.1f);
    std::vector<float> weight(norm.size());
    for (size_t i = 0; i < norm.size(); ++i) weight[i] = 1.0f + norm[i];
    Buffer bape = device_copy(context, ape), bnorm = device_copy(context, weight);
    Buffer kv_rows(context, size_t(n_seq * n_ctx * width) * 4, BufferKind::kDevice);
    Buffer score_rows(context, size_t(n_seq * n_ctx * width) * 4, BufferKind::kDevice);
    Buffer entries(context, size_t(n_seq * shape.n_entries * c.head_dim) * 2, BufferKind::kDevice);
    // The CPU's: every position's rows (score with ape), and the entries.
    std::vector<float> cpu_kv(size_t(n_seq * n_ctx * width)), cpu_score(cpu_kv.size());
    std::vector<uint16_t> want(size_t(n_seq * shape.n_entries * c.head_dim), 0);
    const engine::CompressorShape cs{c.ratio, c.head_dim, c.overlap};
    Recorder r(context);
    // Batches of 7 tokens: sequence 0 and 1 interleaved, positions advancing.
    for (int64_t p0 = 0; p0 < n_ctx; p0 += 7) {
      std::vector<uint32_t> tokens, blocks;
      std::vector<float> angles;
      const int64_t np = std::min<int64_t>(7, n_ctx - p0);
      for (int64_t p = p0; p < p0 + np; ++p) {
        for (int64_t seq = 0; seq < n_seq; ++seq)
          tokens.insert(tokens.end(), {uint32_t(seq), uint32_t(p), 0, 0});
      }
      const int64_t n = int64_t(tokens.size() / 4);
      const std::vector<float> kv = random_floats(rng, size_t(n * width));
      const std::vector<float> score = random_floats(rng, size_t(n * width));
      for (int64_t t = 0; t < n; ++t) {
        const int64_t seq = tokens[size_t(4 * t)], pos = tokens[size_t(4 * t + 1)];
        for (int64_t i = 0; i < width; ++i) {
          const size_t row = size_t((seq * n_ctx + pos) * width + i);
          cpu_kv[row] = kv[size_t(t * width + i)];
          cpu_score[row] = score[size_t(t * width + i)] + ape[size_t((pos % c.ratio) * width + i)];
        }
      }
      for (int64_t t = 0; t < n; ++t) {
        const int64_t seq = tokens[size_t(4 * t)], pos = tokens[size_t(4 * t + 1)];
        if (!cs.completes_block(pos)) continue;
        const int64_t b = pos / c.ratio;
        // compress_block reads a ring: the sequence's rows from its start serve as one
        // ring_rows long only when the positions wrap, so build the ring.
        std::vector<float> ring_kv(size_t(cs.ring_rows() * width)), ring_score(ring_kv.size());
        for (int64_t q = std::max<int64_t>(0, pos + 1 - cs.ring_rows()); q <= pos; ++q) {
          const size_t from = size_t((seq * n_ctx + q) * width);
          const size_t to = size_t((q % cs.ring_rows()) * width);
          std::copy_n(&cpu_kv[from], width, &ring_kv[to]);
          std::copy_n(&cpu_score[from], width, &ring_score[to]);
        }
        std::vector<float> entry(size_t(c.head_dim));
        engine::compress_block(cs, ring_kv.data(), ring_score.data(), b, entry.data());
        engine::compressed_finish(entry.data(), c.head_dim, weight.data(), 1e-6f, rope, b * c.ratio,
                                  c.hadamard);
        for (int64_t i = 0; i < c.head_dim; ++i) {
          want[size_t((seq * shape.n_entries + b) * c.head_dim + i)] =
              fp32_to_fp16(entry[size_t(i)]);
        }
        blocks.insert(blocks.end(), {uint32_t(seq), uint32_t(b)});
        std::vector<float> a(16);
        engine::rope_angles(rope, b * c.ratio, a.data(), a.data() + 8);
        angles.insert(angles.end(), a.begin(), a.end());
      }
      Buffer bt = device_copy(context, tokens), bkv = device_copy(context, kv),
             bsc = device_copy(context, score), bbl = device_copy(context, blocks),
             ban = device_copy(context, angles);
      r.begin();
      herd_test_device.kernels->compressor_rows(r, bkv, bsc, bape, bt, kv_rows, score_rows, shape,
                                                n);
      if (!blocks.empty()) {
        herd_test_device.kernels->compress(r, kv_rows, score_rows, bbl, bnorm, ban, entries, shape,
                                           int64_t(blocks.size() / 2));
      }
      r.submit_and_wait();
    }
    const std::vector<uint16_t> got = read_back<uint16_t>(context, entries, want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const float g = fp16_to_fp32(got[i]), w = fp16_to_fp32(want[i]);
      ASSERT_NEAR(g, w, 2e-3 * (1 + std::fabs(w))) << "element " << i;
    }
  }
}

TEST(VulkanDs4, IndexerTopKMatchesTheCpu) {
  HERD_TEST_VULKAN_CONTEXT(context);
  std::mt19937 rng(7);
  const int64_t n_seq = 2, n_entries = 300, hi = 8, di = 32, ratio = 4;
  std::vector<uint16_t> keys(size_t(n_seq * n_entries * di));
  {
    const std::vector<float> k = random_floats(rng, keys.size());
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = fp32_to_fp16(k[i]);
  }
  for (const int64_t top_k : {1, 4, 64}) {
    SCOPED_TRACE("top_k " + std::to_string(top_k));
    // Tokens at positions seeing none, a few, fewer than top_k and many entries.
    const std::vector<int64_t> positions = {0, 3, 9, 70, 255, 1199};
    std::vector<uint32_t> tokens;
    for (size_t i = 0; i < positions.size(); ++i) {
      tokens.insert(tokens.end(), {uint32_t(i % 2), uint32_t(positions[i]), 0, 0});
    }
    const int64_t n = int64_t(positions.size());
    const std::vector<float> q = random_floats(rng, size_t(n * hi * di));
    const std::vector<float> w = random_floats(rng, size_t(n * hi));
    const float w_scale = 1.0f / std::sqrt(float(hi * di));
    Buffer bq = device_copy(context, q), bw = device_copy(context, w),
           bk = device_copy(context, keys), bt = device_copy(context, tokens);
    Buffer scores(context, size_t(n * n_entries) * 4, BufferKind::kDevice);
    Buffer chosen(context, size_t(n * top_k) * 4, BufferKind::kDevice);
    IndexerShape shape{n, hi, di, n_entries, ratio, top_k, w_scale};
    Recorder r(context);
    r.begin();
    herd_test_device.kernels->indexer_top_k(r, bq, bw, bk, bt, scores, chosen, shape);
    r.submit_and_wait();
    const std::vector<uint32_t> got = read_back<uint32_t>(context, chosen, size_t(n * top_k));
    for (int64_t t = 0; t < n; ++t) {
      const int64_t visible = std::min((positions[size_t(t)] + 1) / ratio, n_entries);
      std::vector<float> wt(static_cast<size_t>(hi)),
          s(static_cast<size_t>(std::max<int64_t>(visible, 1)));
      for (int64_t h = 0; h < hi; ++h) wt[size_t(h)] = w[size_t(t * hi + h)] * w_scale;
      engine::indexer_scores(&q[size_t(t * hi * di)], wt.data(), hi, di,
                             &keys[size_t((t % 2) * n_entries * di)], visible, s.data());
      std::vector<int32_t> want(static_cast<size_t>(top_k));
      const int64_t m = engine::top_k(s.data(), visible, top_k, want.data());
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_EQ(got[size_t(t * top_k + i)], uint32_t(want[size_t(i)]))
            << "token " << t << " rank " << i;
      }
    }
  }
}

// Each token's keys gathered as the CPU does (window rows oldest first, then the chosen or
// visible entries) and through the scalar attend with sinks.
TEST(VulkanDs4, CompressedAttentionMatchesTheScalarKernel) {
  HERD_TEST_VULKAN_CONTEXT(context);
  for (const bool subgroups : {true, false}) {
    Kernels& k = subgroups ? *herd_test_device.kernels : *herd_test_device.shared;
    struct Case {
      int64_t ratio;
      bool indexed;
    };
    for (const Case c : {Case{0, false}, Case{4, true}, Case{16, false}}) {
      SCOPED_TRACE("ratio " + std::to_string(c.ratio) + (c.indexed ? " indexed" : ""));
      std::mt19937 rng{uint32_t(c.ratio + 11)};
      const int64_t n_seq = 2, n_ctx = 64, d = 64, nh = 4, window = 8, top_k = 4;
      const int64_t n_entries = c.ratio > 0 ? n_ctx / c.ratio : 0;
      std::vector<uint16_t> raw(size_t(n_seq * n_ctx * d)),
          entries(size_t(n_seq * std::max<int64_t>(n_entries, 1) * d));
      {
        const std::vector<float> a = random_floats(rng, raw.size()),
                                 b = random_floats(rng, entries.size());
        for (size_t i = 0; i < raw.size(); ++i) raw[i] = fp32_to_fp16(a[i]);
        for (size_t i = 0; i < entries.size(); ++i) entries[i] = fp32_to_fp16(b[i]);
      }
      const std::vector<int64_t> positions = {0, 5, 7, 20, 37, 63};
      const int64_t n = int64_t(positions.size());
      std::vector<uint32_t> tokens, chosen(size_t(n * top_k));
      std::uniform_int_distribution<int> pick(0, 1 << 20);
      for (int64_t t = 0; t < n; ++t) {
        tokens.insert(tokens.end(), {uint32_t(t % 2), uint32_t(positions[size_t(t)]), 0, 0});
        const int64_t visible = c.ratio > 0 ? (positions[size_t(t)] + 1) / c.ratio : 0;
        for (int64_t i = 0; i < top_k && visible > 0; ++i)
          chosen[size_t(t * top_k + i)] = uint32_t(pick(rng) % visible);
      }
      const std::vector<float> q = random_floats(rng, size_t(n * nh * d));
      const std::vector<float> sinks = random_floats(rng, size_t(nh));
      CompressedAttentionShape shape{
          n,       nh,        d,     n_ctx,     window,
          c.ratio, c.indexed, top_k, n_entries, 1.0f / std::sqrt(float(d))};
      std::vector<float> want(size_t(n * nh * d));
      const kernels::AttendFn attend = kernels::attend_kernel(kernels::Isa::kScalar, d, d);
      for (int64_t t = 0; t < n; ++t) {
        const int64_t seq = t % 2, pos = positions[size_t(t)];
        std::vector<uint16_t> keys;
        for (int64_t p = std::max<int64_t>(0, pos - window + 1); p <= pos; ++p) {
          keys.insert(keys.end(), &raw[size_t((seq * n_ctx + p) * d)],
                      &raw[size_t((seq * n_ctx + p + 1) * d)]);
        }
        const int64_t visible = c.ratio > 0 ? std::min((pos + 1) / c.ratio, n_entries) : 0;
        const int64_t m = c.indexed ? std::min(visible, top_k) : visible;
        for (int64_t i = 0; i < m; ++i) {
          const int64_t e = c.indexed ? chosen[size_t(t * top_k + i)] : i;
          keys.insert(keys.end(), &entries[size_t((seq * n_entries + e) * d)],
                      &entries[size_t((seq * n_entries + e + 1) * d)]);
        }
        std::vector<float> qt(&q[size_t(t * nh * d)], &q[size_t((t + 1) * nh * d)]);
        for (float& v : qt) v = fp16_to_fp32(fp32_to_fp16(v));  // as the CPU's
        std::vector<float> scratch(
            size_t(kernels::attend_scratch_floats(nh, int64_t(keys.size()) / d, d, d)));
        kernels::AttendArgs a;
        a.q = qt.data();
        a.n_q = nh;
        a.keys = keys.data();
        a.values = keys.data();
        a.stride = d;
        a.n_pos = int64_t(keys.size()) / d;
        a.k_dim = d;
        a.v_dim = d;
        a.scale = shape.scale;
        a.sinks = sinks.data();
        a.scores = scratch.data();
        a.out = &want[size_t(t * nh * d)];
        attend(a);
      }
      Buffer bq = device_copy(context, q), braw = device_copy(context, raw),
             be = device_copy(context, entries), bc = device_copy(context, chosen),
             bs = device_copy(context, sinks), bt = device_copy(context, tokens);
      Buffer scores(context, size_t(n * nh * shape.key_rows()) * 4, BufferKind::kDevice);
      Buffer out(context, want.size() * 4, BufferKind::kDevice);
      Recorder r(context);
      r.begin();
      k.attend_compressed(r, bq, braw, be, bc, bs, bt, scores, out, shape);
      r.submit_and_wait();
      expect_near(read_back<float>(context, out, want.size()), want, 2e-5);
    }
  }
}

TEST(VulkanDs4, HashRoutingMatchesTheRouter) {
  HERD_TEST_VULKAN_CONTEXT(context);
  std::mt19937 rng(3);
  const int64_t n_expert = 8, n_used = 2, n_vocab = 20, n = 6;
  std::vector<int32_t> table(size_t(n_vocab * n_used));
  for (int64_t v = 0; v < n_vocab; ++v) {
    table[size_t(v * n_used)] = int32_t(v % n_expert);
    table[size_t(v * n_used + 1)] = int32_t((v * 3 + 1) % n_expert);
  }
  std::vector<uint32_t> tokens;
  for (int64_t t = 0; t < n; ++t)
    tokens.insert(tokens.end(), {0, uint32_t(t), uint32_t((t * 7) % n_vocab), 0});
  const std::vector<float> logits = random_floats(rng, size_t(n * n_expert), 3.0f);
  for (const herd::Gating g :
       {herd::Gating::kSoftmax, herd::Gating::kSigmoid, herd::Gating::kSqrtSoftplus}) {
    engine::RouterOptions o;
    o.n_expert = n_expert;
    o.n_used = n_used;
    o.gating = g;
    o.norm_weights = g != herd::Gating::kSigmoid;
    o.weights_scale = 1.5f;
    engine::Router router(o);
    std::vector<int32_t> want_ids(size_t(n * n_used));
    std::vector<float> want_w(size_t(n * n_used));
    for (int64_t t = 0; t < n; ++t) {
      router.route(&logits[size_t(t * n_expert)], nullptr, &want_ids[size_t(t * n_used)],
                   &want_w[size_t(t * n_used)], &table[size_t(tokens[size_t(4 * t + 2)] * n_used)]);
    }
    RouterShape shape;
    shape.gating = g == herd::Gating::kSoftmax   ? RouterShape::kSoftmax
                   : g == herd::Gating::kSigmoid ? RouterShape::kSigmoid
                                                 : RouterShape::kSqrtSoftplus;
    shape.n_tokens = n;
    shape.n_expert = n_expert;
    shape.n_used = n_used;
    shape.norm_weights = o.norm_weights;
    shape.weights_scale = o.weights_scale;
    Buffer bl = device_copy(context, logits), btab = device_copy(context, table),
           bt = device_copy(context, tokens);
    Buffer ids(context, size_t(n * n_used) * 4, BufferKind::kDevice),
        w(context, size_t(n * n_used) * 4, BufferKind::kDevice);
    Recorder r(context);
    r.begin();
    herd_test_device.kernels->hash_route(r, bl, btab, bt, ids, w, shape);
    r.submit_and_wait();
    const std::vector<uint32_t> got_ids = read_back<uint32_t>(context, ids, want_ids.size());
    for (size_t i = 0; i < got_ids.size(); ++i) EXPECT_EQ(got_ids[i], uint32_t(want_ids[i])) << i;
    expect_near(read_back<float>(context, w, want_w.size()), want_w, 1e-5);
  }
}

}  // namespace
}  // namespace herd::vulkan
