// DeepSeek V4 on a Vulkan device, in shard.cpp's order for hyper_connections and
// shard_compressed.cpp / compressed_attention.cpp's for the attention:
//   - the residual stream is n_hc copies per token (x_ [n][n_hc][n_embd]); before each
//     sublayer the streams are mixed into its normed input (hc_pre), after it its output is
//     spread back (hc_post), and the head collapses them once more;
//   - attention reads a sliding window of raw latent rows (the layer's k_cache, a full
//     [n_seq][n_ctx][head_dim] F16 cache rather than the CPU's ring: a batch's rows are
//     stored before attention, and a row is never overwritten while a later token reads it)
//     and compressed entries; the compressors keep every position's rows ([n_seq][n_ctx]
//     [width] F32, for the same reason) and write an entry per block the batch completes;
//   - the lightning indexer's top-k runs in a shader: nothing comes back mid-forward;
//   - a hash-routed layer takes its experts from its table by token id.
// The step's own uploads (token sequence, position and id; the blocks each layer completes
// and their angles; inverse angles for the output's rope) go up in one copy.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/vulkan_backend.h"
#include "util/error.h"

namespace herd::engine {

using vulkan::Buffer;
using W = LayerWeight;

namespace {

constexpr size_t kAlign = 256;  // Vulkan's largest minStorageBufferOffsetAlignment

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

// A compressor's state on the device: rows of every position, entries of every block.
struct DeviceCompressor {
  vulkan::CompressShape shape;
  Buffer kv_rows, score_rows;  // [n_seq * n_ctx][width] F32
  Buffer entries;              // F16 [n_seq][n_entries][head_dim]
};

struct VulkanBackend::Ds4 {
  std::vector<std::vector<DeviceCompressor>> compressors;  // per layer: none, attention, indexer
  std::vector<Buffer> hash_tables;                         // per layer: [n_vocab][n_used] or empty
  DeviceMatrix output_hc_fn;
  Buffer output_hc_scale, output_hc_base;
  Buffer ones;  // [max(width, head_dim)]: rms_norm's weight for the plain norms
  // Per batch of `capacity` rows: the mixes' input, the mixes, the kept weights, the query
  // latent, the compressors' products, the indexer's queries, head weights, scores and
  // choice, the attention's scores, the grouped projection's outputs, group ids.
  Buffer hc_flat, hc_mixes, hc_coeffs, qr, comp_kv, comp_score, idx_q, idx_w, idx_scores, chosen,
      scores, oa, group_ids;
  int64_t max_width = 0, max_entries = 0, key_rows = 0;
  // The step's uploads: [n][4] tokens | per layer [n][2] blocks, [n][n_rot] their angles | per
  // rope group [n][n_rot] inverse angles; each part at a kAlign offset.
  Buffer upload, step;
  size_t tokens_at = 0;
  std::vector<size_t> blocks_at, block_angles_at, inverse_at;
  std::vector<int64_t> n_blocks;  // per layer, this step
};

void VulkanBackend::load_ds4() {
  const HParams& hp = s_.hp;
  ds4_ = std::make_shared<Ds4>();
  Ds4& d = *ds4_;
  const int64_t n_seq = s_.kv.n_seq(), n_ctx = s_.kv.n_ctx();
  // The raw window lives in each layer's k_cache, one latent row per position.
  if (kv_dim_ != hp.head_dim) {
    throw Error("engine",
                "compressed attention on a Vulkan device: " + std::to_string(s_.n_head_kv) +
                    " latent heads; the device caches one (run it with --device cpu)");
  }
  d.compressors.resize(layers_.size());
  d.hash_tables.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i].host;
    const CompressedAttentionOptions o = s_.compressed_options(l);
    if (!l.hash_experts.empty()) {
      d.hash_tables[i] = make_buffer(l.hash_experts.size() * 4, "hash routing table");
      vulkan::upload(*context_, d.hash_tables[i], l.hash_experts.data(), l.hash_experts.size() * 4);
    }
    d.key_rows = std::max(d.key_rows, o.window);
    if (o.ratio == 0) continue;
    for (int which = 0; which < (o.indexed ? 2 : 1); ++which) {
      DeviceCompressor c;
      c.shape.ratio = o.ratio;
      c.shape.head_dim = which == 0 ? o.head_dim : o.indexer_dim;
      c.shape.overlap = which == 1 || o.indexed;
      c.shape.n_ctx = n_ctx;
      c.shape.n_entries = (n_ctx + o.ratio - 1) / o.ratio;
      c.shape.n_rot = o.compressed_rope.n_rot;
      c.shape.hadamard = which == 1;
      c.shape.eps = o.eps;
      const size_t rows = size_t(n_seq * n_ctx * c.shape.width()) * 4;
      const std::string what = "compressor of layer " + std::to_string(i);
      c.kv_rows = make_buffer(rows, what + " (kv rows)");
      c.score_rows = make_buffer(rows, what + " (score rows)");
      c.entries = make_buffer(size_t(n_seq * c.shape.n_entries * c.shape.head_dim) * 2,
                              what + " (entries)");
      d.max_width = std::max(d.max_width, c.shape.width());
      d.max_entries = std::max(d.max_entries, c.shape.n_entries);
      d.compressors[i].push_back(std::move(c));
    }
    vulkan::CompressedAttentionShape a;
    a.window = o.window;
    a.ratio = o.ratio;
    a.indexed = o.indexed;
    a.top_k = o.top_k;
    a.n_entries = d.compressors[i][0].shape.n_entries;
    d.key_rows = std::max(d.key_rows, a.key_rows());
  }
  if (s_.spec.output) {  // the head's collapse runs wherever the stage ends the model
    d.output_hc_fn =
        DeviceMatrix{s_.output_hc_fn.type(), s_.output_hc_fn.rows(), s_.output_hc_fn.cols(), 0, {}};
    const kernels::MatrixView v = s_.output_hc_fn.gguf_view();
    const size_t bytes = row_bytes(v.type, v.cols) * size_t(v.rows);
    d.output_hc_fn.buffer = make_buffer(bytes, "output_hc_fn.weight");
    vulkan::upload(*context_, d.output_hc_fn.buffer, v.data, bytes);
    auto vector = [&](const std::vector<float>& values, const char* what) {
      Buffer b = make_buffer(values.size() * 4, what);
      vulkan::upload(*context_, b, values.data(), values.size() * 4);
      return b;
    };
    d.output_hc_scale = vector(s_.output_hc_scale, "output_hc_scale.weight");
    d.output_hc_base = vector(s_.output_hc_base, "output_hc_base.weight");
  }
  const std::vector<float> ones(size_t(std::max(hp.hidden_width(), hp.head_dim)), 1.0f);
  d.ones = make_buffer(ones.size() * 4, "ones");
  vulkan::upload(*context_, d.ones, ones.data(), ones.size() * 4);
}

void VulkanBackend::reserve_ds4(int64_t n) {
  const HParams& hp = s_.hp;
  Ds4& d = *ds4_;
  auto floats = [&](int64_t count, const char* what) {
    return make_buffer(size_t(std::max<int64_t>(count, 1)) * 4, what);
  };
  const int64_t mixes = hp.n_hc_mixes();
  d.hc_flat = floats(n * hp.hidden_width(), "hyper-connection inputs");
  d.hc_mixes = floats(n * mixes, "hyper-connection mixes");
  d.hc_coeffs = floats(n * mixes, "hyper-connection weights");
  d.qr = floats(n * hp.q_lora_rank, "query latents");
  d.comp_kv = floats(n * d.max_width, "compressor kv");
  d.comp_score = floats(n * d.max_width, "compressor scores");
  d.idx_q = floats(n * hp.n_indexer_head * hp.indexer_head_dim, "indexer queries");
  d.idx_w = floats(n * hp.n_indexer_head, "indexer head weights");
  d.idx_scores = floats(n * d.max_entries, "indexer scores");
  d.chosen = floats(n * std::max<int64_t>(1, hp.indexer_top_k), "indexer choice");
  d.scores = floats(n * s_.n_head * d.key_rows, "compressed attention scores");
  const int64_t groups = std::max<int64_t>(1, hp.n_out_group);
  d.oa = floats(n * groups * hp.o_lora_rank, "grouped output");
  // Slot j of every token is group j: the grouped products run as experts chosen by id.
  std::vector<uint32_t> ids(size_t(n * groups));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = uint32_t(i % size_t(groups));
  d.group_ids = floats(int64_t(ids.size()), "output group ids");
  vulkan::upload(*context_, d.group_ids, ids.data(), ids.size() * 4);
  // The step's uploads.
  size_t at = 0;
  d.tokens_at = at;
  at += aligned(size_t(n) * 16);
  d.blocks_at.assign(layers_.size(), 0);
  d.block_angles_at.assign(layers_.size(), 0);
  d.n_blocks.assign(layers_.size(), 0);
  for (size_t i = 0; i < layers_.size(); ++i) {
    d.blocks_at[i] = at;
    at += aligned(size_t(n) * 8);
    d.block_angles_at[i] = at;
    at += aligned(size_t(n * std::max<int64_t>(1, max_rot_)) * 4);
  }
  d.inverse_at.assign(ropes_.size(), 0);
  for (size_t g = 0; g < ropes_.size(); ++g) {
    d.inverse_at[g] = at;
    at += aligned(size_t(n * std::max<int64_t>(1, max_rot_)) * 4);
  }
  d.upload = make_buffer(at, "compressed attention uploads", vulkan::BufferKind::kStaging);
  d.step = make_buffer(at, "compressed attention step");
}

void VulkanBackend::begin_ds4(const Batch& batch) {
  Ds4& d = *ds4_;
  const int64_t n = batch.size();
  auto* base = static_cast<uint8_t*>(d.upload.mapped());
  HERD_CHECK(base != nullptr);
  auto* tokens = reinterpret_cast<uint32_t*>(base + d.tokens_at);
  for (int64_t t = 0; t < n; ++t) {
    tokens[4 * t] = uint32_t(batch.seq[t]);
    tokens[4 * t + 1] = uint32_t(batch.pos[t]);
    tokens[4 * t + 2] = uint32_t(batch.tokens[t]);
    tokens[4 * t + 3] = 0;
  }
  // The blocks each compressed layer completes: the tokens ending one, with the angles of
  // the block's first position in the layer's rope.
  for (size_t i = 0; i < layers_.size(); ++i) {
    d.n_blocks[i] = 0;
    if (d.compressors[i].empty()) continue;
    const int64_t ratio = d.compressors[i][0].shape.ratio;
    const Rope& rope = layers_[i].host->rope;
    auto* blocks = reinterpret_cast<uint32_t*>(base + d.blocks_at[i]);
    auto* angles = reinterpret_cast<float*>(base + d.block_angles_at[i]);
    int64_t m = 0;
    for (int64_t t = 0; t < n; ++t) {
      if ((batch.pos[t] + 1) % ratio != 0) continue;
      const int64_t block = batch.pos[t] / ratio;
      blocks[2 * m] = uint32_t(batch.seq[t]);
      blocks[2 * m + 1] = uint32_t(block);
      float* a = angles + m * rope.n_rot;
      if (rope.n_rot > 0) rope_angles(rope, block * ratio, a, a + rope.n_rot / 2);
      ++m;
    }
    d.n_blocks[i] = m;
  }
  // The output's inverse rope: the same cosines, the sines negated.
  for (size_t g = 0; g < ropes_.size(); ++g) {
    const int64_t n_rot = ropes_[g]->n_rot;
    auto* inverse = reinterpret_cast<float*>(base + d.inverse_at[g]);
    for (int64_t t = 0; t < n && n_rot > 0; ++t) {
      float* a = inverse + t * n_rot;
      rope_angles(*ropes_[g], batch.pos[t], a, a + n_rot / 2);
      for (int64_t j = n_rot / 2; j < n_rot; ++j) a[j] = -a[j];
    }
  }
  recorder_->copy(d.upload, 0, d.step, 0, d.upload.bytes());
}

void VulkanBackend::record_hash_route(const DeviceLayer& l, int64_t n) {
  const Ds4& d = *ds4_;
  const size_t i = size_t(&l - layers_.data());
  const RouterOptions o = router_options(s_.hp);
  vulkan::RouterShape route;
  route.gating = o.gating == Gating::kSoftmax   ? vulkan::RouterShape::kSoftmax
                 : o.gating == Gating::kSigmoid ? vulkan::RouterShape::kSigmoid
                                                : vulkan::RouterShape::kSqrtSoftplus;
  route.n_tokens = n;
  route.n_expert = s_.hp.n_expert;
  route.n_used = s_.hp.n_expert_used;
  route.norm_weights = o.norm_weights;
  route.weights_scale = o.weights_scale;
  kernels_->hash_route(*recorder_, logits_, d.hash_tables[i], vulkan::Binding(d.step, d.tokens_at),
                       ids_, weights_, route);
}

void VulkanBackend::record_hc_head(int64_t n) {
  const HParams& hp = s_.hp;
  Ds4& d = *ds4_;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  k.rms_norm(r, x_, d.ones, d.hc_flat, hp.hidden_width(), n, hp.rms_eps);
  mul(d.output_hc_fn, d.hc_flat, d.hc_mixes, n);
  vulkan::HyperShape shape{n, hp.n_hc, n_embd_, hp.hc_sinkhorn_iters, hp.hc_eps, true};
  k.hc_pre(r, x_, d.hc_mixes, d.output_hc_scale, d.output_hc_base, d.hc_coeffs, h_, shape);
  r.copy(h_, 0, x_, 0, size_t(n * n_embd_) * 4);  // x: [n][n_embd] from here on
}

void VulkanBackend::record_ds4_layer(const DeviceLayer& l, const Batch& batch) {
  const HParams& hp = s_.hp;
  Ds4& d = *ds4_;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n = batch.size();
  const vulkan::HyperShape shape{n, hp.n_hc, n_embd_, hp.hc_sinkhorn_iters, hp.hc_eps, false};
  // The streams mixed into the sublayer's normed input h.
  auto pre = [&](W fn, W scale, W base, W norm) {
    k.rms_norm(r, x_, d.ones, d.hc_flat, hp.hidden_width(), n, hp.rms_eps);
    mul(l.matrix(fn), d.hc_flat, d.hc_mixes, n);
    k.hc_pre(r, x_, d.hc_mixes, l.vector(scale), l.vector(base), d.hc_coeffs, h_, shape);
    k.rms_norm(r, h_, l.vector(norm), h_, n_embd_, n, hp.rms_eps);
  };
  pre(W::kHcAttnFn, W::kHcAttnScale, W::kHcAttnBase, W::kAttnNorm);
  record_compressed(l, batch);
  k.hc_post(r, proj_, d.hc_coeffs, x_, shape);
  pre(W::kHcFfnFn, W::kHcFfnScale, W::kHcFfnBase, W::kFfnNorm);
  bool wrote = false;
  if (l.host->options.moe && l.has(W::kGateExps)) {
    record_experts(l, n);
    wrote = true;
  }
  if (l.host->ffn_runs) {  // the shared expert (or a dense FFN): every token, weight 1
    record_gated(l.matrix(W::kFfnGate), l.matrix(W::kFfnUp), l.matrix(W::kFfnDown), n,
                 hp.swiglu_limit_shared, wrote ? shared_ : proj_);
    if (wrote) k.add(r, proj_, shared_, proj_, n * n_embd_);
    wrote = true;
  }
  HERD_CHECK(wrote);
  k.hc_post(r, proj_, d.hc_coeffs, x_, shape);
}

void VulkanBackend::record_compressed(const DeviceLayer& l, const Batch& batch) {
  Ds4& d = *ds4_;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const size_t i = size_t(&l - layers_.data());
  const CompressedAttentionOptions o = s_.compressed_options(*l.host);
  const int64_t n = batch.size(), hd = o.head_dim, nh = o.n_head, n_rot = o.rope.n_rot;
  const bool neox = o.rope_style == RopeStyle::kNeoxHalves;
  const Buffer& angles = angles_[size_t(l.rope_group)];
  const vulkan::Binding tokens(d.step, d.tokens_at);
  // The query latent, and the latent row (K = V) of every token, roped and cached.
  mul(l.matrix(W::kAttnQA), h_, d.qr, n);
  k.rms_norm(r, d.qr, l.vector(W::kAttnQANorm), d.qr, o.q_lora, n, o.eps);
  mul(l.matrix(W::kAttnKv), h_, k_, n);
  k.rms_norm(r, k_, l.vector(W::kAttnKvANorm), k_, hd, n, o.eps);
  if (n_rot > 0) k.rope(r, k_, angles, {n, 1, hd, n_rot, hd - n_rot, neox});
  k.store_rows(r, k_, k_rows_, l.k_cache, hd, n);
  // Queries: per head a plain RMSNorm, then the rope of the tail.
  mul(l.matrix(W::kAttnQB), d.qr, q_, n);
  k.rms_norm(r, q_, d.ones, q_, hd, n * nh, o.eps);
  if (n_rot > 0) k.rope(r, q_, angles, {n, nh, hd, n_rot, hd - n_rot, neox});

  // The compressors' rows and the entries of the blocks the batch completes, then the
  // indexer's choice.
  const std::vector<DeviceCompressor>& comps = d.compressors[i];
  auto compressor = [&](const DeviceCompressor& c, W kv, W gate, W ape, W norm) {
    mul(l.matrix(kv), h_, d.comp_kv, n);
    mul(l.matrix(gate), h_, d.comp_score, n);
    k.compressor_rows(r, d.comp_kv, d.comp_score, l.vector(ape), tokens, c.kv_rows, c.score_rows,
                      c.shape, n);
    if (d.n_blocks[i] > 0) {
      k.compress(r, c.kv_rows, c.score_rows, vulkan::Binding(d.step, d.blocks_at[i]),
                 l.vector(norm), vulkan::Binding(d.step, d.block_angles_at[i]), c.entries, c.shape,
                 d.n_blocks[i]);
    }
  };
  if (o.ratio > 0) {
    compressor(comps[0], W::kCompKv, W::kCompGate, W::kCompApe, W::kCompNorm);
  }
  if (o.indexed) {
    compressor(comps[1], W::kIndexerCompKv, W::kIndexerCompGate, W::kIndexerCompApe,
               W::kIndexerCompNorm);
    const int64_t hi = o.indexer_heads, di = o.indexer_dim;
    mul(l.matrix(W::kIndexerQB), d.qr, d.idx_q, n);
    mul(l.matrix(W::kIndexerProj), h_, d.idx_w, n);
    if (n_rot > 0) k.rope(r, d.idx_q, angles, {n, hi, di, n_rot, di - n_rot, neox});
    k.hadamard(r, d.idx_q, di, n * hi);
    vulkan::IndexerShape shape;
    shape.n_tokens = n;
    shape.n_head = hi;
    shape.dim = di;
    shape.n_entries = comps[1].shape.n_entries;
    shape.ratio = o.ratio;
    shape.top_k = o.top_k;
    shape.w_scale = 1.0f / std::sqrt(static_cast<float>(hi * di));
    k.indexer_top_k(r, d.idx_q, d.idx_w, comps[1].entries, tokens, d.idx_scores, d.chosen, shape);
  }

  // Attention over the window and the entries; the output's rope undone.
  vulkan::CompressedAttentionShape a;
  a.n_tokens = n;
  a.n_head = nh;
  a.dim = hd;
  a.n_ctx = s_.kv.n_ctx();
  a.window = o.window;
  a.ratio = o.ratio;
  a.indexed = o.indexed;
  a.top_k = o.top_k;
  a.n_entries = comps.empty() ? 0 : comps[0].shape.n_entries;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Without entries (or a choice) those bindings are unread: any buffer does.
  k.attend_compressed(r, q_, l.k_cache, comps.empty() ? l.k_cache : comps[0].entries, d.chosen,
                      l.vector(W::kAttnSinks), tokens, d.scores, attn_, a);
  if (n_rot > 0) {
    k.rope(r, attn_, vulkan::Binding(d.step, d.inverse_at[size_t(l.rope_group)]),
           {n, nh, hd, n_rot, hd - n_rot, neox});
  }
  // Grouped output projection: group g of a token's heads through attn_output_a[g] (slot g
  // of the token, an expert by id), then attn_output_b.
  const DeviceMatrix& wo_a = l.matrix(W::kAttnOutputA);
  vulkan::ExpertShape groups;
  groups.n_expert = wo_a.n_expert;
  groups.rows = o.o_lora;
  groups.cols = nh * hd / o.n_group;
  groups.n_tokens = n;
  groups.n_used = o.n_group;
  groups.x_per_slot = true;
  k.matvec_experts(r, wo_a.type, wo_a.buffer, attn_, d.group_ids, d.oa, groups);
  mul(l.matrix(W::kAttnOutputB), d.oa, proj_, n);
}

}  // namespace herd::engine
