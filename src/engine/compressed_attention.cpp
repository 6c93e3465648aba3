#include "engine/compressed_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/lightning_indexer.h"
#include "quant/float16.h"
#include "util/error.h"

namespace herd::engine {
namespace {

using kernels::MatmulJob;

constexpr int64_t kMaxDim = 512;  // head and entry sizes (rope angles and entries on the stack)

float round_f16(float x) {
  return fp16_to_fp32(fp32_to_fp16(x));
}

// Keys a query may read: its window and the compressed entries it may choose from.
int64_t max_compressed_keys(const CompressedAttentionOptions& o, int64_t n_entries) {
  if (o.ratio == 0) return 0;
  return o.indexed ? std::min(o.top_k, n_entries) : n_entries;
}

// Rotates the last rope.n_rot values of x [d] by the angles of pos (inverse: by -angle).
void rope_tail(const Rope& rope, RopeStyle style, int64_t pos, bool inverse, float* x, int64_t d,
               int64_t n_heads) {
  float cos[kMaxDim / 2], sin[kMaxDim / 2];
  rope_angles(rope, pos, cos, sin);
  if (inverse) {
    for (int64_t i = 0; i < rope.n_rot / 2; ++i) sin[i] = -sin[i];
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    rope_apply(x + h * d + d - rope.n_rot, rope.n_rot, style, cos, sin);
  }
}

// Feeds the batch's rows to compressor `which` of the layer (tokens in batch order, each into
// its sequence's ring) and writes every block the batch completes to the cache's entries.
void run_compressor(const CompressedAttentionOptions& o, const CompressorShape& c, int which,
                    const kernels::PackedMatrix& wkv, const kernels::PackedMatrix& wgate,
                    const float* ape, const float* norm, bool hadamard, const Batch& batch,
                    const float* u, CompressedKvCache& cache, int64_t layer,
                    CompressedAttentionScratch& s, ThreadPool& pool,
                    kernels::Workspace& workspace) {
  const int64_t n = batch.size(), width = c.width();
  const MatmulJob jobs[] = {{&wkv, s.comp_kv.data(), nullptr},
                            {&wgate, s.comp_score.data(), nullptr}};
  kernels::matmul_batch(jobs, u, n, pool, workspace);
  float entry[kMaxDim];
  for (int64_t t = 0; t < n; ++t) {
    const int64_t seq = batch.seq[t], pos = batch.pos[t];
    const int64_t row = (pos % c.ring_rows()) * width;
    float* kv = cache.ring_kv(layer, seq, which) + row;
    float* score = cache.ring_score(layer, seq, which) + row;
    const float* a = ape + (pos % c.ratio) * width;
    for (int64_t i = 0; i < width; ++i) {
      kv[i] = s.comp_kv[static_cast<size_t>(t * width + i)];
      score[i] = s.comp_score[static_cast<size_t>(t * width + i)] + a[i];
    }
    if (!c.completes_block(pos)) continue;
    const int64_t b = pos / c.ratio;
    compress_block(c, cache.ring_kv(layer, seq, which), cache.ring_score(layer, seq, which), b,
                   entry);
    compressed_finish(entry, c.head_dim, norm, o.eps, o.compressed_rope, b * c.ratio, hadamard);
    uint16_t* dst = cache.entries(layer, seq, which) + b * c.head_dim;
    for (int64_t i = 0; i < c.head_dim; ++i) dst[i] = fp32_to_fp16(entry[i]);
  }
}

// The indexer's choice of entries for every token: chosen [n][top_k], n_chosen [n].
void run_indexer(const CompressedAttentionOptions& o, const CompressedAttentionWeights& w,
                 const Batch& batch, const float* u, CompressedKvCache& cache, int64_t layer,
                 CompressedAttentionScratch& s, ThreadPool& pool, kernels::Workspace& workspace) {
  const int64_t n = batch.size(), hi = o.indexer_heads, di = o.indexer_dim;
  kernels::matmul(*w.idx_q_b, s.qr.data(), n, s.idx_q.data(), pool, workspace);
  kernels::matmul(*w.idx_proj, u, n, s.idx_w.data(), pool, workspace);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(hi * di));
  const int64_t n_entries = cache.n_entries(layer);
  pool.run(n, [&](int64_t t, int thread) {
    const int64_t seq = batch.seq[t], pos = batch.pos[t];
    float* q = s.idx_q.data() + t * hi * di;
    float* wt = s.idx_w.data() + t * hi;
    rope_tail(o.compressed_rope, o.rope_style, pos, false, q, di, hi);
    for (int64_t h = 0; h < hi; ++h) hadamard_transform(q + h * di, di);
    for (int64_t h = 0; h < hi; ++h) wt[h] *= w_scale;
    const int64_t visible = std::min((pos + 1) / o.ratio, n_entries);
    float* scores = s.idx_scores.data() + thread * n_entries;
    indexer_scores(q, wt, hi, di, cache.entries(layer, seq, 1), visible, scores);
    s.n_chosen[static_cast<size_t>(t)] =
        top_k(scores, visible, o.top_k, s.chosen.data() + t * o.top_k);
  });
}

}  // namespace

void CompressedAttentionScratch::reserve(const CompressedAttentionOptions& o, int64_t n_entries,
                                         int64_t n, int n_threads) {
  // Every buffer grows to what this layer needs (layers differ in their compressors), so
  // that reserving for each layer once leaves nothing to allocate later.
  const int64_t d = o.head_dim;
  const int64_t width = std::max<int64_t>(o.indexed ? 2 * d : d, 2 * o.indexer_dim);
  const int64_t group = o.n_head * d / o.n_group;
  const int64_t n_keys = o.window + max_compressed_keys(o, n_entries);
  auto size = [](auto& v, int64_t count) {
    if (static_cast<int64_t>(v.size()) < std::max<int64_t>(count, 1)) {
      v.resize(static_cast<size_t>(std::max<int64_t>(count, 1)));
    }
  };
  size(qr, n * o.q_lora);
  size(q, n * o.n_head * d);
  size(kv, n * d);
  size(kv16, n * d);
  size(comp_kv, o.ratio > 0 ? n * width : 0);
  size(comp_score, o.ratio > 0 ? n * width : 0);
  size(idx_q, o.indexed ? n * o.indexer_heads * o.indexer_dim : 0);
  size(idx_w, o.indexed ? n * o.indexer_heads : 0);
  size(attn, n * o.n_head * d);
  size(group_in, n * group);
  size(group_out, n * o.o_lora);
  size(oa, n * o.n_group * o.o_lora);
  size(scores, n_threads * kernels::attend_scratch_floats(o.n_head, n_keys, d, d));
  size(keys, n_threads * n_keys * d);
  size(chosen, o.indexed ? n * o.top_k : 0);
  size(n_chosen, n);
  size(previous, n);
  size(idx_scores, o.indexed ? n_threads * n_entries : 0);
  capacity = std::max(capacity, n);
  threads = std::max(threads, static_cast<int64_t>(n_threads));
}

size_t CompressedAttentionScratch::bytes() const {
  size_t floats = 0;
  for (const auto* v : {&qr, &q, &kv, &comp_kv, &comp_score, &idx_q, &idx_w, &attn, &group_in,
                        &group_out, &oa, &scores, &idx_scores}) {
    floats += v->size();
  }
  return floats * sizeof(float) + (kv16.size() + keys.size()) * sizeof(uint16_t) +
         chosen.size() * sizeof(int32_t) + (n_chosen.size() + previous.size()) * sizeof(int64_t);
}

void compressed_attention(const CompressedAttentionOptions& o, const CompressedAttentionWeights& w,
                          const Batch& batch, const float* u, CompressedKvCache& cache,
                          int64_t layer, CompressedAttentionScratch& s, kernels::AttendFn attend,
                          ThreadPool& pool, kernels::Workspace& workspace, float* out) {
  const int64_t n = batch.size(), d = o.head_dim, nh = o.n_head;
  HERD_CHECK_MSG(d <= kMaxDim && o.rope.n_rot <= d && s.capacity >= n &&
                     s.threads >= static_cast<int64_t>(pool.size()),
                 "head " + std::to_string(d) + " batch " + std::to_string(n));
  const CompressedCacheShape& shape = cache.shape();
  const CompressedLayerSpec& spec = shape.layers[static_cast<size_t>(layer)];
  HERD_CHECK(spec.ratio == o.ratio && spec.indexed == o.indexed && shape.window == o.window);

  // Queries and the latent (K = V) of every token.
  const MatmulJob first[] = {{w.wq_a, s.qr.data(), nullptr}, {w.wkv, s.kv.data(), nullptr}};
  kernels::matmul_batch(first, u, n, pool, workspace);
  pool.run(n, [&](int64_t t, int) {
    float* qr = s.qr.data() + t * o.q_lora;
    float* kv = s.kv.data() + t * d;
    rms_norm(qr, w.q_a_norm, o.q_lora, o.eps, qr);
    rms_norm(kv, w.kv_norm, d, o.eps, kv);
    rope_tail(o.rope, o.rope_style, batch.pos[t], false, kv, d, 1);
    for (int64_t i = 0; i < d; ++i) s.kv16[static_cast<size_t>(t * d + i)] = fp32_to_fp16(kv[i]);
  });
  kernels::matmul(*w.wq_b, s.qr.data(), n, s.q.data(), pool, workspace);
  pool.run(n, [&](int64_t t, int) {
    float* q = s.q.data() + t * nh * d;
    for (int64_t h = 0; h < nh; ++h) rms_norm_plain(q + h * d, d, o.eps, q + h * d);
    rope_tail(o.rope, o.rope_style, batch.pos[t], false, q, d, nh);
    for (int64_t i = 0; i < nh * d; ++i) q[i] = round_f16(q[i]);
  });
  // The batch row holding the previous position of a token's sequence (-1: in the cache).
  for (int64_t t = 0; t < n; ++t) {
    int64_t prev = -1;
    for (int64_t j = t - 1; j >= 0; --j) {
      if (batch.seq[j] != batch.seq[t]) continue;
      if (batch.pos[j] == batch.pos[t] - 1) prev = j;
      break;
    }
    s.previous[static_cast<size_t>(t)] = prev;
  }

  // Compressed entries of the blocks the batch completes, and the indexer's choice.
  if (o.ratio > 0) {
    run_compressor(o, attention_compressor(shape, spec), 0, *w.comp_kv, *w.comp_gate, w.comp_ape,
                   w.comp_norm, false, batch, u, cache, layer, s, pool, workspace);
    if (o.indexed) {
      run_compressor(o, indexer_compressor(shape, spec), 1, *w.idx_comp_kv, *w.idx_comp_gate,
                     w.idx_comp_ape, w.idx_comp_norm, true, batch, u, cache, layer, s, pool,
                     workspace);
      run_indexer(o, w, batch, u, cache, layer, s, pool, workspace);
    }
  }

  // Attention of each token over its window and its compressed entries.
  const int64_t n_entries = cache.n_entries(layer);
  const int64_t key_rows = o.window + max_compressed_keys(o, n_entries);
  const int64_t score_floats = kernels::attend_scratch_floats(nh, key_rows, d, d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  pool.run(n, [&](int64_t t, int thread) {
    const int64_t seq = batch.seq[t], pos = batch.pos[t];
    uint16_t* keys = s.keys.data() + thread * key_rows * d;
    int64_t m = 0;
    // Window rows, oldest first: the batch holds positions pos - in_batch + 1 .. pos (its
    // rows linked by `previous`), the cache the older ones.
    const int64_t first = std::max<int64_t>(0, pos - o.window + 1);
    int64_t in_batch = 0;
    for (int64_t r = t; r >= 0 && pos - in_batch >= first; r = s.previous[static_cast<size_t>(r)]) {
      ++in_batch;
    }
    for (int64_t p = first; p <= pos - in_batch; ++p, ++m) {
      std::memcpy(keys + m * d, cache.raw(layer, seq, p),
                  static_cast<size_t>(d) * sizeof(uint16_t));
    }
    m += in_batch;
    for (int64_t i = 0, r = t; i < in_batch; ++i, r = s.previous[static_cast<size_t>(r)]) {
      std::memcpy(keys + (m - 1 - i) * d, s.kv16.data() + r * d,
                  static_cast<size_t>(d) * sizeof(uint16_t));
    }
    if (o.ratio > 0) {
      const uint16_t* entries = cache.entries(layer, seq, 0);
      if (o.indexed) {
        const int32_t* chosen = s.chosen.data() + t * o.top_k;
        for (int64_t i = 0; i < s.n_chosen[static_cast<size_t>(t)]; ++i, ++m) {
          std::memcpy(keys + m * d, entries + chosen[i] * d,
                      static_cast<size_t>(d) * sizeof(uint16_t));
        }
      } else {
        const int64_t visible = std::min((pos + 1) / o.ratio, n_entries);
        std::memcpy(keys + m * d, entries, static_cast<size_t>(visible * d) * sizeof(uint16_t));
        m += visible;
      }
    }
    kernels::AttendArgs a;
    a.q = s.q.data() + t * nh * d;
    a.n_q = nh;
    a.keys = keys;
    a.values = keys;
    a.stride = d;
    a.n_pos = m;
    a.k_dim = d;
    a.v_dim = d;
    a.scale = scale;
    a.sinks = w.sinks;
    a.scores = s.scores.data() + thread * score_floats;
    a.out = s.attn.data() + t * nh * d;
    attend(a);
    rope_tail(o.rope, o.rope_style, pos, true, a.out, d, nh);
  });
  // The batch's rows join the window (in batch order: a later position overwrites).
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(cache.raw(layer, batch.seq[t], batch.pos[t]), s.kv16.data() + t * d,
                static_cast<size_t>(d) * sizeof(uint16_t));
  }

  // Grouped output projection.
  const int64_t group = nh * d / o.n_group;
  for (int64_t g = 0; g < o.n_group; ++g) {
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(s.group_in.data() + t * group, s.attn.data() + t * nh * d + g * group,
                  static_cast<size_t>(group) * sizeof(float));
    }
    kernels::matmul((*w.wo_a)[static_cast<size_t>(g)], s.group_in.data(), n, s.group_out.data(),
                    pool, workspace);
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(s.oa.data() + t * o.n_group * o.o_lora + g * o.o_lora,
                  s.group_out.data() + t * o.o_lora, static_cast<size_t>(o.o_lora) * sizeof(float));
    }
  }
  kernels::matmul(*w.wo_b, s.oa.data(), n, out, pool, workspace);
}

}  // namespace herd::engine
