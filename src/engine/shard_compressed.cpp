// DeepSeek V4's parts of the forward pass: compressed attention over the shard's compressed
// cache (compressed_attention.h) and the hyper-connections around every sublayer and before
// the output head (hyper_connection.h).
#include <algorithm>
#include <string>

#include "engine/hyper_connection.h"
#include "engine/shard_state.h"
#include "util/error.h"

namespace herd::engine {

CompressedCacheShape compressed_cache_shape(const ArchSpec& arch, const HParams& hp,
                                            const ShardSpec& spec, int64_t n_seq, int64_t n_ctx) {
  CompressedCacheShape shape;
  shape.n_seq = n_seq;
  shape.n_ctx = n_ctx;
  shape.window = hp.sliding_window;
  shape.head_dim = hp.head_dim;
  shape.indexer_dim = hp.indexer_head_dim;
  const int64_t end = spec.layer_end < 0 ? hp.n_layer : spec.layer_end;
  for (int64_t il = spec.layer_begin; il < end; ++il) {
    const LayerOptions o = layer_options(arch, hp, il);
    shape.layers.push_back({o.compress_ratio, o.compress_indexed});
  }
  return shape;
}

CompressedAttentionOptions Shard::State::compressed_options(const Layer& l) const {
  CompressedAttentionOptions o;
  o.n_embd = hp.n_embd;
  o.n_head = hp.n_head;
  o.head_dim = hp.head_dim;
  o.q_lora = hp.q_lora_rank;
  o.window = hp.sliding_window;
  o.ratio = l.options.compress_ratio;
  o.indexed = l.options.compress_indexed;
  o.top_k = hp.indexer_top_k;
  o.indexer_heads = hp.n_indexer_head;
  o.indexer_dim = hp.indexer_head_dim;
  o.n_group = hp.n_out_group;
  o.o_lora = hp.o_lora_rank;
  o.eps = hp.rms_eps;
  // The entries and the indexer's queries rope as the compressed layers do: this layer's
  // rope when it compresses (a window-only layer uses neither).
  o.rope = l.rope;
  o.compressed_rope = l.rope;
  o.rope_style = arch->rope_style;
  return o;
}

size_t compressed_scratch_bytes(const Shard::State& s, int64_t n_ctx, int64_t n_batch,
                                int n_threads) {
  CompressedAttentionScratch scratch;
  const int64_t end = s.spec.layer_end < 0 ? s.hp.n_layer : s.spec.layer_end;
  for (int64_t il = s.spec.layer_begin; il < end; ++il) {
    Layer l;
    l.options = layer_options(*s.arch, s.hp, il);
    const int64_t ratio = l.options.compress_ratio;
    scratch.reserve(s.compressed_options(l), ratio > 0 ? (n_ctx + ratio - 1) / ratio : 0, n_batch,
                    n_threads);
  }
  return scratch.bytes();
}

void Shard::State::compressed_attention_layer(const Layer& l, int64_t layer, const Batch& batch,
                                              ThreadPool& pool, float* out) {
  const CompressedAttentionOptions o = compressed_options(l);
  CompressedAttentionWeights w;
  w.wq_a = &l.wq_a;
  w.wq_b = &l.wq_b;
  w.wkv = &l.wkv;
  w.wo_a = &l.wo_a;
  w.wo_b = &l.wo_b;
  w.q_a_norm = l.q_a_norm.data();
  w.kv_norm = l.kv_a_norm.data();
  w.sinks = l.sinks.data();
  w.comp_kv = &l.comp_kv;
  w.comp_gate = &l.comp_gate;
  w.comp_ape = l.comp_ape.data();
  w.comp_norm = l.comp_norm.data();
  w.idx_q_b = &l.idx_q_b;
  w.idx_proj = &l.idx_proj;
  w.idx_comp_kv = &l.idx_comp_kv;
  w.idx_comp_gate = &l.idx_comp_gate;
  w.idx_comp_ape = l.idx_comp_ape.data();
  w.idx_comp_norm = l.idx_comp_norm.data();
  compressed.reserve(o, ckv.n_entries(layer), batch.size(), pool.size());
  compressed_attention(o, w, batch, h.data(), ckv, layer, compressed, l.attend, pool, workspace,
                       out);
}

void Shard::State::compressed_begin(const Batch& batch) {
  // A slot's first token in the batch continues it or starts it again; its later ones follow.
  for (int64_t t = 0; t < batch.size(); ++t) {
    const int64_t seq = batch.seq[t], pos = batch.pos[t];
    int64_t expect = ckv.length(seq);
    for (int64_t j = t - 1; j >= 0; --j) {
      if (batch.seq[j] == seq) {
        expect = batch.pos[j] + 1;
        break;
      }
    }
    if (pos != 0 && pos != expect) {
      throw Error("engine", "slot " + std::to_string(seq) + " holds " + std::to_string(expect) +
                                " positions of compressed attention: a batch must continue it at " +
                                std::to_string(expect) + " or start it again at 0, not at " +
                                std::to_string(pos));
    }
  }
}

void Shard::State::compressed_end(const Batch& batch) {
  for (int64_t t = 0; t < batch.size(); ++t) ckv.set_length(batch.seq[t], batch.pos[t] + 1);
}

RecurrentSnapshot Shard::State::compressed_snapshot(int32_t seq) const {
  RecurrentSnapshot s;
  s.pos = ckv.length(seq);
  s.rows.resize(ckv.state_floats());
  ckv.save_state(seq, s.rows.data());
  return s;
}

void Shard::State::compressed_restore(int32_t seq, const RecurrentSnapshot& snapshot) {
  HERD_CHECK(snapshot.rows.size() == ckv.state_floats());
  ckv.restore_state(seq, snapshot.rows.data(), snapshot.pos);
}

void Shard::State::hc_pre(const PackedMatrix& fn, const std::vector<float>& scale,
                          const std::vector<float>& base, const std::vector<float>& norm, int64_t n,
                          ThreadPool& pool) {
  const int64_t width = hp.hidden_width(), mixes = hp.n_hc_mixes(), e = hp.n_embd;
  pool.run(n, [&](int64_t t, int) {
    rms_norm_plain(x.data() + t * width, width, hp.rms_eps, hc_flat.data() + t * width);
  });
  kernels::matmul(fn, hc_flat.data(), n, hc_mixes.data(), pool, workspace);
  HyperOptions o;
  o.n_hc = static_cast<int>(hp.n_hc);
  o.sinkhorn_iters = static_cast<int>(hp.hc_sinkhorn_iters);
  o.eps = hp.hc_eps;
  pool.run(n, [&](int64_t t, int) {
    float* wt = hc_coeffs.data() + t * mixes;  // pre, post, comb
    hc_weights(o, hc_mixes.data() + t * mixes, scale.data(), base.data(), wt, wt + o.n_hc,
               wt + 2 * o.n_hc);
    float* ht = h.data() + t * e;
    hc_collapse(x.data() + t * width, wt, o.n_hc, e, ht);
    rms_norm(ht, norm.data(), e, hp.rms_eps, ht);
  });
}

void Shard::State::hc_post(const float* out, int64_t n, ThreadPool& pool) {
  const int64_t width = hp.hidden_width(), mixes = hp.n_hc_mixes(), e = hp.n_embd;
  const int n_hc = static_cast<int>(hp.n_hc);
  pool.run(n, [&](int64_t t, int) {
    const float* wt = hc_coeffs.data() + t * mixes;
    hc_expand(out + t * e, wt + n_hc, wt + 2 * n_hc, n_hc, e, x.data() + t * width);
  });
}

void Shard::State::hc_head(const Batch& batch, ThreadPool& pool) {
  const int64_t n = batch.size(), width = hp.hidden_width(), e = hp.n_embd;
  const int n_hc = static_cast<int>(hp.n_hc);
  pool.run(n, [&](int64_t t, int) {
    rms_norm_plain(x.data() + t * width, width, hp.rms_eps, hc_flat.data() + t * width);
  });
  kernels::matmul(output_hc_fn, hc_flat.data(), n, hc_mixes.data(), pool, workspace);
  HyperOptions o;
  o.n_hc = n_hc;
  o.eps = hp.hc_eps;
  pool.run(n, [&](int64_t t, int) {
    float pre[kMaxHyperStreams];
    hc_head_weights(o, hc_mixes.data() + t * n_hc, output_hc_scale.data(), output_hc_base.data(),
                    pre);
    hc_collapse(x.data() + t * width, pre, n_hc, e, h.data() + t * e);
  });
  std::copy_n(h.data(), n * e, x.data());  // x: [n][n_embd] from here on
}

}  // namespace herd::engine
