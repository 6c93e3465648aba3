// The attention half of a layer: grouped-query attention (llama, qwen, Gemma 3, gpt-oss,
// GLM-4.5, MiniMax-M2) and multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-5), over
// the shard's KV cache.
#include <algorithm>
#include <cmath>

#include "engine/shard_state.h"
#include "quant/float16.h"
#include "util/error.h"

namespace herd::engine {
namespace {

// Largest rope width (angles live on the stack).
constexpr int64_t kMaxRot = 1024;

void store_f16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

// x [n] /= rms(x): an RMSNorm without weight.
void unit_rms_norm(float* x, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

void Shard::State::attention(int64_t il, const Batch& batch, ThreadPool& pool,
                             AllReduce* all_reduce) {
  const int64_t layer = il - spec.layer_begin;
  const Layer& l = layers[static_cast<size_t>(layer)];
  if (arch->attention == AttentionKind::kMla) {
    mla_attention(l, layer, batch, pool);
  } else {
    gqa_attention(l, layer, batch, pool, all_reduce);
  }
}

bool Shard::State::qk_row_sums() const {
  return arch->qk_norm && arch->qk_norm_whole_row && !hp.qk_norm_absent;
}

void Shard::State::sum_qk_squares(const float* qt, const float* kt, float* sums) const {
  // The KV heads this rank counts: those whose first query head it holds, so that a KV head
  // cached by two ranks (a cut GQA group) is counted once over the stage.
  const int64_t hd = hp.head_dim, group = hp.n_head / hp.n_head_kv;
  double q2 = 0, k2 = 0;
  for (int64_t i = 0; i < n_head * hd; ++i) q2 += static_cast<double>(qt[i]) * qt[i];
  for (int64_t g = 0; g < n_head_kv; ++g) {
    const int64_t first = (spec.slice.kv_head_begin + g) * group;
    if (first < spec.slice.head_begin || first >= spec.slice.head_end) continue;
    for (int64_t i = g * hd; i < (g + 1) * hd; ++i) k2 += static_cast<double>(kt[i]) * kt[i];
  }
  sums[0] = static_cast<float>(q2);
  sums[1] = static_cast<float>(k2);
}

void Shard::State::attend_cached(const Layer& l, int64_t layer, const Batch& batch,
                                 ThreadPool& pool, const float* queries, int64_t q_stride,
                                 int64_t k_dim, int64_t v_dim, float* out, int64_t out_stride) {
  const int64_t n = batch.size();
  const bool mla = arch->attention == AttentionKind::kMla;
  const int64_t window = l.options.sliding ? hp.sliding_window : 0;
  const std::vector<HeadRun>& head_runs = l.head_runs;
  const auto n_runs = static_cast<int64_t>(head_runs.size());
  const int64_t per_thread = scores_per_thread();
  // Fewer (token, run of heads) calls than threads (decode of MLA, whose heads are one run):
  // each call's positions in `chunks` chunks on several threads, merged after.
  const int64_t calls = n * n_runs;
  const int64_t chunks = kernels::attend_takes_partial(k_dim, v_dim) && calls < pool.size()
                             ? (pool.size() + calls - 1) / calls
                             : 1;
  auto positions = [&](int64_t t, int64_t* start) {
    const int64_t pos = batch.pos[t];
    *start = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    return pos - *start + 1;
  };
  // A call is cut when each chunk gets at least kMinChunk positions.
  constexpr int64_t kMinChunk = 64;
  auto cut = [&](int64_t n_pos) { return chunks > 1 && n_pos >= chunks * kMinChunk; };
  const int64_t chunk_floats = max_heads_per_call() * (v_dim + 2);
  // Per (token, run of heads, chunk): attention over the sequence's cached positions
  // [start, pos], start = pos - window + 1 on a sliding-window layer.
  pool.run(calls * chunks, [&](int64_t task, int thread) {
    const int64_t call = task / chunks, c = task % chunks;
    const int64_t t = call / n_runs;
    const HeadRun& r = head_runs[static_cast<size_t>(call % n_runs)];
    int64_t start = 0;
    const int64_t n_pos = positions(t, &start);
    const bool split = cut(n_pos);
    if (!split && c > 0) return;
    const int64_t begin = split ? start + c * n_pos / chunks : start;
    const int64_t end = split ? start + (c + 1) * n_pos / chunks : start + n_pos;
    kernels::AttendArgs a;
    a.q = queries + t * q_stride + r.head * k_dim;
    a.n_q = r.n_heads;
    a.keys = kv.k(layer, batch.seq[t], begin) + (mla ? 0 : r.kv_head * k_dim);
    a.values = mla ? a.keys : kv.v(layer, batch.seq[t], begin) + r.kv_head * v_dim;
    a.stride = kv.k_dim(layer);
    a.n_pos = end - begin;
    a.k_dim = k_dim;
    a.v_dim = v_dim;
    a.scale = l.attn_scale;
    a.sinks = l.sinks.empty() ? nullptr : l.sinks.data() + r.head;
    a.scores = scores.data() + thread * per_thread;
    a.out = out + t * out_stride + r.head * v_dim;
    if (split) {  // [chunk][heads][v_dim], then [chunk][heads][2]
      float* mine = attn_chunks.data() + call * chunks * chunk_floats;
      a.out = mine + c * r.n_heads * v_dim;
      a.partial = mine + chunks * r.n_heads * v_dim + c * r.n_heads * 2;
    }
    l.attend(a);
  });
  if (chunks == 1) return;
  for (int64_t call = 0; call < calls; ++call) {
    const int64_t t = call / n_runs;
    const HeadRun& r = head_runs[static_cast<size_t>(call % n_runs)];
    int64_t start = 0;
    if (!cut(positions(t, &start))) continue;
    const float* mine = attn_chunks.data() + call * chunks * chunk_floats;
    kernels::merge_attention(mine + chunks * r.n_heads * v_dim, mine, chunks, r.n_heads, v_dim,
                             l.sinks.empty() ? nullptr : l.sinks.data() + r.head,
                             out + t * out_stride + r.head * v_dim);
  }
}

void Shard::State::gqa_attention(const Layer& l, int64_t layer, const Batch& batch,
                                 ThreadPool& pool, AllReduce* all_reduce) {
  const int64_t n = batch.size();
  const LayerOptions& lo = l.options;
  const int64_t hd = lo.head_dim, hdv = lo.head_dim_v, n_rot = l.rope.n_rot;
  // The slice's KV heads (a whole shard's: this layer's own count).
  const int64_t kv_heads = partial_sums ? n_head_kv : lo.n_head_kv;
  const int64_t q_dim = n_head * hd, kv_dim = kv_heads * hd, kv_dim_v = kv_heads * hdv;
  // Values from the keys' projection (Gemma 4's global layers without attn_v): v = k before
  // the k norm and rope.
  const bool v_is_k = lo.own_kv && !lo.has_v;
  if (!lo.own_kv) {
    // Gemma 4's KV-shared layers: only queries; the keys and values are lo.kv_layer's.
    kernels::matmul(l.wq, h.data(), n, q.data(), pool, workspace);
  } else if (v_is_k) {
    const kernels::MatmulJob qk[] = {{&l.wq, q.data()}, {&l.wk, k.data()}};
    kernels::matmul_batch(qk, h.data(), n, pool, workspace);
  } else {
    const kernels::MatmulJob qkv[] = {{&l.wq, q.data()}, {&l.wk, k.data()}, {&l.wv, v.data()}};
    kernels::matmul_batch(qkv, h.data(), n, pool, workspace);
  }
  const bool gated = arch->attn_output_gate;
  if (gated) {
    // Each head's rows were [q | gate]: the gates go to attn_gate, the queries close up to
    // [n][q_dim] (head hh moves down to hh * hd, after its gate is out of the way).
    pool.run(n, [&](int64_t t, int) {
      float* row = q.data() + t * 2 * q_dim;
      for (int64_t hh = 0; hh < n_head; ++hh) {
        std::copy_n(row + (2 * hh + 1) * hd, hd, attn_gate.data() + t * q_dim + hh * hd);
      }
    });
    // Each head's q moves to a lower address, never over a part not yet moved: in order, on
    // one thread.
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t hh = 0; hh < n_head; ++hh) {
        std::copy_n(q.data() + t * 2 * q_dim + 2 * hh * hd, hd, q.data() + t * q_dim + hh * hd);
      }
    }
  }

  // Token t's values where they are the keys' projection, then the biases.
  auto prepare = [&](int64_t t) {
    float* qt = q.data() + t * q_dim;
    float* kt = k.data() + t * kv_dim;
    float* vt = v.data() + t * kv_dim_v;
    if (v_is_k) std::copy_n(kt, kv_dim, vt);
    if (l.bq.empty()) return;
    for (int64_t i = 0; i < q_dim; ++i) qt[i] += l.bq[static_cast<size_t>(i)];
    if (!lo.own_kv) return;
    for (int64_t i = 0; i < kv_dim; ++i) kt[i] += l.bk[static_cast<size_t>(i)];
    for (int64_t i = 0; i < kv_dim_v; ++i) vt[i] += l.bv[static_cast<size_t>(i)];
  };
  // A norm over the whole q / k row (all heads) needs every rank's sums of squares first:
  // [n][2] (q, k), summed over the stage's ranks.
  const bool row_sums = qk_row_sums();
  if (row_sums) {
    pool.run(n, [&](int64_t t, int) {
      prepare(t);
      sum_qk_squares(q.data() + t * q_dim, k.data() + t * kv_dim, qk_sums.data() + 2 * t);
    });
    if (all_reduce != nullptr) all_reduce->sum(qk_sums.data(), static_cast<size_t>(2 * n));
  }
  // Per token: biases, q/k norm, rope (of the first n_rot dimensions of each head), then
  // the new keys and values (a KV-shared layer has none) go into the cache.
  pool.run(n, [&](int64_t t, int) {
    float cos[kMaxRot / 2], sin[kMaxRot / 2];
    rope_angles(l.rope, batch.pos[t], cos, sin);
    float* qt = q.data() + t * q_dim;
    float* kt = k.data() + t * kv_dim;
    float* vt = v.data() + t * kv_dim_v;
    if (row_sums) {
      // The whole row's RMS, from the model's q_dim and kv_dim elements (as rms_norm).
      const float* sums = qk_sums.data() + 2 * t;
      const auto scale = [&](float sum, int64_t count) {
        return static_cast<float>(
            1.0 / std::sqrt(static_cast<double>(sum) / static_cast<double>(count) + hp.rms_eps));
      };
      const float qs = scale(sums[0], hp.n_head * hd), ks = scale(sums[1], hp.n_head_kv * hd);
      for (int64_t i = 0; i < q_dim; ++i) qt[i] = qt[i] * qs * l.q_norm[static_cast<size_t>(i)];
      for (int64_t i = 0; i < kv_dim; ++i) kt[i] = kt[i] * ks * l.k_norm[static_cast<size_t>(i)];
    } else {
      prepare(t);
    }
    for (int64_t hh = 0; hh < n_head; ++hh) {
      float* x = qt + hh * hd;
      if (!row_sums && !l.q_norm.empty()) rms_norm(x, l.q_norm.data(), hd, hp.rms_eps, x);
      rope_apply(x, n_rot, arch->rope_style, cos, sin);
    }
    if (!lo.own_kv) return;
    for (int64_t hh = 0; hh < kv_heads; ++hh) {
      float* x = kt + hh * hd;
      if (!row_sums && !l.k_norm.empty()) rms_norm(x, l.k_norm.data(), hd, hp.rms_eps, x);
      rope_apply(x, n_rot, arch->rope_style, cos, sin);
    }
    if (arch->v_norm) {  // weightless: the ones vector is the identity weight
      for (int64_t hh = 0; hh < kv_heads; ++hh) {
        float* x = vt + hh * hdv;
        unit_rms_norm(x, hdv, hp.rms_eps);
      }
    }
    store_f16(kt, kv_dim, kv.k(layer, batch.seq[t], batch.pos[t]));
    store_f16(vt, kv_dim_v, kv.v(layer, batch.seq[t], batch.pos[t]));
  });
  // A KV-shared layer reads its source layer's cache (written earlier in this pass).
  const int64_t kv_layer = lo.kv_layer - spec.layer_begin;
  attend_cached(l, kv_layer, batch, pool, q.data(), q_dim, hd, hdv, attn.data(), n_head * hdv);
  if (gated) {
    pool.run(n, [&](int64_t t, int) {
      float* o = attn.data() + t * n_head * hdv;
      const float* g = attn_gate.data() + t * q_dim;
      for (int64_t i = 0; i < n_head * hdv; ++i) o[i] /= 1.0f + std::exp(-g[i]);
    });
  }
}

// Multi-head latent attention in its absorbed form: the cache holds per token the normed
// latent c (kv_lora) and one roped key k_r shared by all heads. Head h's key for a cached
// token is [W_k,h c | k_r] and its value W_v,h c; so q_h . k = (W_k,h^T q_nope,h) . c +
// q_rope,h . k_r, and attention runs over [c | k_r] rows with queries [k_b,h q_nope,h |
// q_rope,h] (k_b,h = W_k,h^T), values c, and v_b,h applied to each head's result after.
void Shard::State::mla_attention(const Layer& l, int64_t layer, const Batch& batch,
                                 ThreadPool& pool) {
  const int64_t n = batch.size();
  const int64_t hd = hp.head_dim, hdv = hp.head_dim_v, n_rot = hp.n_rot, nope = hd - n_rot;
  const int64_t kv_lora = hp.kv_lora_rank, latent = kv_lora + n_rot;
  const int64_t q_dim = n_head * hd;
  // q: [n][n_head][nope | rope]; k: [n][latent] = [c | k_r]; v: [n][q_lora].
  if (hp.q_lora_rank > 0) {
    const kernels::MatmulJob a[] = {{&l.wq_a, v.data()}, {&l.wkv_a, k.data()}};
    kernels::matmul_batch(a, h.data(), n, pool, workspace);
    const int64_t q_lora = hp.q_lora_rank;
    pool.run(n, [&](int64_t t, int) {
      float* x = v.data() + t * q_lora;
      rms_norm(x, l.q_a_norm.data(), q_lora, hp.rms_eps, x);
    });
    kernels::matmul(l.wq_b, v.data(), n, q.data(), pool, workspace);
  } else {
    const kernels::MatmulJob a[] = {{&l.wq_b, q.data()}, {&l.wkv_a, k.data()}};
    kernels::matmul_batch(a, h.data(), n, pool, workspace);
  }
  float* mq = mla_q.data();  // [n][n_head][latent]
  pool.run(n, [&](int64_t t, int) {
    float cos[kMaxRot / 2], sin[kMaxRot / 2];
    rope_angles(l.rope, batch.pos[t], cos, sin);
    float* c = k.data() + t * latent;
    rms_norm(c, l.kv_a_norm.data(), kv_lora, hp.rms_eps, c);
    rope_apply(c + kv_lora, n_rot, arch->rope_style, cos, sin);
    store_f16(c, latent, kv.k(layer, batch.seq[t], batch.pos[t]));
    for (int64_t hh = 0; hh < n_head; ++hh) {
      float* q_rope = q.data() + t * q_dim + hh * hd + nope;
      rope_apply(q_rope, n_rot, arch->rope_style, cos, sin);
      std::copy_n(q_rope, n_rot, mq + (t * n_head + hh) * latent + kv_lora);
    }
  });
  if (mla_decompressed(l, layer, batch, pool)) return;
  // q_nope of each head into latent space: [n][nope] -> [n][kv_lora], all heads' products
  // in one pass over the pool (kMaxBatch at a time).
  float* in = mla_in.data();    // [n_head][n][nope], then [n_head][n][kv_lora]
  float* out = mla_out.data();  // [n_head][n][kv_lora], then [n_head][n][hdv]
  auto per_head = [&](const std::vector<PackedMatrix>& w, int64_t in_dim, int64_t out_dim) {
    for (int64_t h0 = 0; h0 < n_head; h0 += static_cast<int64_t>(kernels::kMaxBatch)) {
      const int64_t h1 = std::min(n_head, h0 + static_cast<int64_t>(kernels::kMaxBatch));
      kernels::MatmulJob jobs[kernels::kMaxBatch];
      for (int64_t hh = h0; hh < h1; ++hh) {
        jobs[hh - h0] = {&w[static_cast<size_t>(hh)], out + hh * n * out_dim, in + hh * n * in_dim};
      }
      kernels::matmul_batch({jobs, static_cast<size_t>(h1 - h0)}, nullptr, n, pool, workspace);
    }
  };
  for (int64_t hh = 0; hh < n_head; ++hh) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(q.data() + t * q_dim + hh * hd, nope, in + (hh * n + t) * nope);
  }
  per_head(l.k_b, nope, kv_lora);
  for (int64_t hh = 0; hh < n_head; ++hh) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(out + (hh * n + t) * kv_lora, kv_lora, mq + (t * n_head + hh) * latent);
  }
  attend_cached(l, layer, batch, pool, mq, n_head * latent, latent, kv_lora, mla_o.data(),
                n_head * kv_lora);
  // Each head's latent result through its v_b: [n][kv_lora] -> [n][hdv].
  for (int64_t hh = 0; hh < n_head; ++hh) {
    for (int64_t t = 0; t < n; ++t) {
      std::copy_n(mla_o.data() + (t * n_head + hh) * kv_lora, kv_lora, in + (hh * n + t) * kv_lora);
    }
  }
  per_head(l.v_b, kv_lora, hdv);
  for (int64_t hh = 0; hh < n_head; ++hh) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(out + (hh * n + t) * hdv, hdv, attn.data() + t * n_head * hdv + hh * hdv);
  }
}

}  // namespace herd::engine
