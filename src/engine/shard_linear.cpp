// The linear-attention half of a hybrid model's layer: Gated DeltaNet (Qwen3-Next, Qwen3.5 /
// 3.6), its projections around delta_net_mix (delta_net.h) and the per-sequence state it
// keeps in the shard's cache.
#include <algorithm>

#include "engine/shard_state.h"
#include "util/error.h"

namespace herd::engine {

bool Shard::has_recurrent_state() const {
  return state_->kv.has_recurrent() || state_->arch->attention == AttentionKind::kCompressed;
}

RecurrentSnapshot Shard::snapshot_state(int32_t seq) const {
  if (state_->arch->attention == AttentionKind::kCompressed)
    return state_->compressed_snapshot(seq);
  return state_->kv.snapshot(seq);
}

void Shard::restore_state(int32_t seq, const RecurrentSnapshot& snapshot) {
  if (state_->arch->attention == AttentionKind::kCompressed) {
    state_->compressed_restore(seq, snapshot);
    return;
  }
  state_->kv.restore(seq, snapshot);
}

void Shard::State::prepare_linear(Layer& l) const {
  const DeltaNetDims& d = delta_dims;
  const int64_t conv_dim = d.conv_dim(), kernel = d.conv_kernel;
  // ssm_conv1d is [conv_dim][kernel] (a channel's taps together); the kernel reads
  // [kernel][conv_dim], one tap of every channel together.
  HERD_CHECK(static_cast<int64_t>(l.delta_conv.size()) == conv_dim * kernel);
  std::vector<float> taps(l.delta_conv.size());
  for (int64_t c = 0; c < conv_dim; ++c) {
    for (int64_t j = 0; j < kernel; ++j) taps[j * conv_dim + c] = l.delta_conv[c * kernel + j];
  }
  l.delta_conv = std::move(taps);
  const int64_t group = d.n_v_heads / d.n_k_heads;
  for (int64_t j = 0; j < d.n_v_heads; ++j) {
    l.delta_k_head.push_back(
        static_cast<int32_t>(arch->delta_v_tiled ? j % d.n_k_heads : j / group));
  }
}

CacheLayout Shard::State::cache_layout(int64_t n_ctx, int64_t k_dim, int64_t v_dim) const {
  CacheLayout layout;
  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    layout.layers.push_back(layer_options(*arch, hp, il).linear ? LayerCache::kRecurrent
                                                                : LayerCache::kKv);
  }
  layout.n_seq = options.n_seq;
  layout.n_ctx = n_ctx;
  layout.k_dim = k_dim;
  layout.v_dim = v_dim;
  if (arch->delta_net) layout.recurrent = delta_dims.state_shape();
  return layout;
}

void Shard::State::linear_attention(const Layer& l, int64_t layer, const Batch& batch,
                                    ThreadPool& pool, float* out) {
  const DeltaNetDims& d = delta_dims;
  const int64_t n = batch.size(), n_v = d.n_v_heads;
  float* b = delta_ba_buf.data();       // [n][n_v]
  float* alpha = b + n * n_v;           // [n][n_v]
  float* mixed = delta_out_buf.data();  // ssm_ba's [n][2 n_v], before it is split
  const bool fused = l.delta_ba.rows() > 0;
  kernels::MatmulJob jobs[4] = {{&l.delta_qkv, delta_qkv_buf.data()},
                                {&l.delta_z, delta_z_buf.data()}};
  size_t n_jobs = 2;
  if (fused) {
    jobs[n_jobs++] = {&l.delta_ba, mixed};
  } else {
    jobs[n_jobs++] = {&l.delta_beta, b};
    jobs[n_jobs++] = {&l.delta_alpha, alpha};
  }
  kernels::matmul_batch({jobs, n_jobs}, h.data(), n, pool, workspace);
  if (fused) {
    // Rows per K head g: [b of its r V heads | a of them].
    const int64_t r = n_v / d.n_k_heads;
    for (int64_t t = 0; t < n; ++t) {
      const float* m = mixed + t * 2 * n_v;
      for (int64_t g = 0; g < d.n_k_heads; ++g) {
        for (int64_t i = 0; i < r; ++i) {
          b[t * n_v + g * r + i] = m[g * 2 * r + i];
          alpha[t * n_v + g * r + i] = m[g * 2 * r + r + i];
        }
      }
    }
  }
  const DeltaNetWeights w{l.delta_conv.data(), l.delta_dt_bias.data(), l.delta_a.data(),
                          l.delta_norm.data(), l.delta_k_head.data()};
  delta_net_mix(d, w, batch, layer, kv,
                {delta_qkv_buf.data(), delta_z_buf.data(), b, alpha, delta_out_buf.data()},
                options.isa, delta_scratch, pool);
  kernels::matmul(l.delta_out, delta_out_buf.data(), n, out, pool, workspace);
}

}  // namespace herd::engine
