#include "engine/delta_net.h"

#include <algorithm>
#include <cmath>

#include "engine/ops.h"
#include "util/error.h"

namespace herd::engine {
namespace {

// Channels per conv task: enough work to pay for the task, few enough to spread.
constexpr int64_t kConvChunk = 256;

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

}  // namespace

void DeltaNetScratch::reserve(const DeltaNetDims& dims, int64_t n, int n_threads) {
  auto grow = [](auto& v, size_t size) {
    if (v.size() < size) v.resize(size);
  };
  grow(conv_out, static_cast<size_t>(n * dims.conv_dim()));
  grow(rule, static_cast<size_t>(n_threads) *
                 static_cast<size_t>(kernels::delta_rule_scratch_floats(dims.dk, dims.dv)));
  if (runs.capacity() < static_cast<size_t>(n)) runs.reserve(static_cast<size_t>(n));
}

size_t DeltaNetScratch::bytes_for(const DeltaNetDims& dims, int64_t n, int n_threads) {
  return static_cast<size_t>(n * dims.conv_dim() +
                             n_threads * kernels::delta_rule_scratch_floats(dims.dk, dims.dv)) *
             sizeof(float) +
         static_cast<size_t>(n) * sizeof(Run);
}

void delta_net_mix(const DeltaNetDims& d, const DeltaNetWeights& w, const Batch& batch,
                   int64_t layer, KvCache& cache, const DeltaNetIo& io, kernels::Isa isa,
                   DeltaNetScratch& scratch, ThreadPool& pool) {
  const int64_t n = batch.size();
  const int64_t conv_dim = d.conv_dim(), value_dim = d.value_dim();
  const int64_t n_k = d.n_k_heads, n_v = d.n_v_heads;
  HERD_CHECK(static_cast<int64_t>(scratch.conv_out.size()) >= n * conv_dim);

  // Runs: maximal blocks of consecutive tokens of one slot, in batch order.
  auto& runs = scratch.runs;
  runs.clear();
  bool repeated = false;  // a slot in two runs: those must not run side by side
  for (int64_t t = 0; t < n; ++t) {
    const int32_t seq = batch.seq[static_cast<size_t>(t)];
    if (!runs.empty() && runs.back().seq == seq) {
      runs.back().end = t + 1;
      continue;
    }
    for (const auto& r : runs) repeated = repeated || r.seq == seq;
    runs.push_back({seq, t, t + 1});
  }
  const auto n_runs = static_cast<int64_t>(runs.size());

  // The convolution, (run, chunk of channels) per task; then q and k normalized and the
  // gates computed, per token.
  float* conv_out = scratch.conv_out.data();
  const int64_t n_chunks = (conv_dim + kConvChunk - 1) / kConvChunk;
  auto conv = [&](int64_t r, int64_t c) {
    const auto& run = runs[static_cast<size_t>(r)];
    const int64_t c0 = c * kConvChunk, c1 = std::min(conv_dim, c0 + kConvChunk);
    kernels::conv1d_silu({run.end - run.begin, c1 - c0, d.conv_kernel,
                          io.qkv + run.begin * conv_dim + c0, conv_dim, w.conv + c0, conv_dim,
                          cache.conv_state(layer, run.seq) + c0, conv_dim,
                          conv_out + run.begin * conv_dim + c0, conv_dim});
  };
  if (!repeated) {
    pool.run(n_runs * n_chunks, [&](int64_t task, int) { conv(task / n_chunks, task % n_chunks); });
  } else {
    for (int64_t r = 0; r < n_runs; ++r) pool.run(n_chunks, [&](int64_t c, int) { conv(r, c); });
  }
  pool.run(n, [&](int64_t t, int) {
    float* row = conv_out + t * conv_dim;
    for (int64_t h = 0; h < 2 * n_k; ++h) kernels::l2_normalize(row + h * d.dk, d.dk, d.rms_eps);
    float* b = io.b + t * n_v;
    float* g = io.alpha + t * n_v;
    for (int64_t j = 0; j < n_v; ++j) {
      b[j] = 1.0f / (1.0f + std::exp(-b[j]));
      g[j] = softplus(g[j] + w.dt_bias[j]) * w.a[j];
    }
  });

  // The delta rule, (run, V head) per task; each task normalizes and gates its own output.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  const int64_t rule_floats = kernels::delta_rule_scratch_floats(d.dk, d.dv);
  // Always the recurrence: its result for a token does not depend on how the sequence's
  // tokens are grouped into batches (pipeline micro-batches, replay after a lost node,
  // prefix reuse from a checkpoint, prompt chunks all stay bit-identical to one pass), and
  // the rule is a few percent of a layer's work (at Qwen3.6-35B-A3B's sizes about 2% of
  // the matmuls' multiply-adds), so the chunked form's gain on it does not pay for that.
  const kernels::DeltaRuleFn recurrent = kernels::delta_rule_kernel(isa, d.dv, false);
  auto rule = [&](int64_t r, int64_t j, int thread) {
    const auto& run = runs[static_cast<size_t>(r)];
    const int64_t len = run.end - run.begin;
    const int64_t kh = w.k_head[j];
    const float* row = conv_out + run.begin * conv_dim;
    float* out = io.out + run.begin * value_dim + j * d.dv;
    kernels::DeltaRuleArgs args{len,
                                d.dk,
                                d.dv,
                                row + kh * d.dk,
                                conv_dim,
                                row + (n_k + kh) * d.dk,
                                conv_dim,
                                row + 2 * n_k * d.dk + j * d.dv,
                                conv_dim,
                                io.b + run.begin * n_v + j,
                                io.alpha + run.begin * n_v + j,
                                n_v,
                                scale,
                                cache.delta_state(layer, run.seq) + j * d.dk * d.dv,
                                out,
                                value_dim,
                                scratch.rule.data() + thread * rule_floats};
    recurrent(args);
    for (int64_t t = 0; t < len; ++t) {
      float* o = out + t * value_dim;
      const float* z = io.z + (run.begin + t) * value_dim + j * d.dv;
      rms_norm(o, w.norm, d.dv, d.rms_eps, o);
      for (int64_t i = 0; i < d.dv; ++i) o[i] *= z[i] / (1.0f + std::exp(-z[i]));
    }
  };
  if (!repeated) {
    pool.run(n_runs * n_v, [&](int64_t task, int thread) { rule(task / n_v, task % n_v, thread); });
  } else {
    for (int64_t r = 0; r < n_runs; ++r) {
      pool.run(n_v, [&](int64_t j, int thread) { rule(r, j, thread); });
    }
  }
}

}  // namespace herd::engine
