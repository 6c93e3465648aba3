// Gemma 4 on a Vulkan device, in the order of the CPU's gqa_attention (shard_attention.cpp),
// moe_beside_dense_ffn (shard_ffn.cpp) and per-layer inputs (shard_per_layer.cpp): layers of
// their own attention shapes (sliding and global layers differ in head size and KV heads, so
// each caches rows of its own width), values from the keys' projection where a layer has no
// attn_v, a weightless RMSNorm of each value head, KV-shared layers that read an earlier
// layer's cache, experts beside the dense FFN, the per-layer inputs and the output scale.
#include <algorithm>
#include <cmath>

#include "engine/vulkan_backend.h"
#include "util/error.h"

namespace herd::engine {

using W = LayerWeight;

void VulkanBackend::prepare_layer_shapes() {
  const HParams& hp = s_.hp;
  // The shard's layers' per-layer inputs (none for a stage without layers).
  per_layer_ = s_.per_layer_embd != nullptr ? hp.n_embd_per_layer : 0;
  int64_t max_v = 0;
  q_dim_ = kv_dim_ = 0;
  for (const DeviceLayer& l : layers_) {
    const LayerOptions& lo = l.host->options;
    // The attention shader reads keys and values at the same strides.
    if (lo.head_dim != lo.head_dim_v) {
      throw Error("engine", std::string(s_.arch->name) +
                                " on a Vulkan device: keys and values of different sizes not "
                                "yet on the Vulkan backend (run it with --device cpu)");
    }
    q_dim_ = std::max(q_dim_, s_.n_head * lo.head_dim);
    kv_dim_ = std::max(kv_dim_, l.kv_dim);
    max_v = std::max(max_v, lo.head_dim_v);
  }
  // The widest layers' rows are k_rows_, each other width gets its own.
  for (DeviceLayer& l : layers_) {
    if (l.kv_dim == kv_dim_) continue;
    auto it = std::find(row_widths_.begin(), row_widths_.end(), l.kv_dim);
    if (it == row_widths_.end()) it = row_widths_.insert(row_widths_.end(), l.kv_dim);
    l.rows_group = int(it - row_widths_.begin());
  }
  const std::vector<float> ones(size_t(std::max<int64_t>(max_v, 1)), 1.0f);
  ones_ = make_buffer(ones.size() * 4, "value norm");
  vulkan::upload(*context_, ones_, ones.data(), ones.size() * 4);
}

void VulkanBackend::record_shaped_attention(const DeviceLayer& l, const Batch& batch) {
  const HParams& hp = s_.hp;
  const Layer& host = *l.host;
  const LayerOptions& lo = host.options;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n = batch.size(), n_head = s_.n_head, n_kv = lo.n_head_kv;
  const int64_t hd = lo.head_dim, hdv = lo.head_dim_v, kv_dim = n_kv * hd;
  // q [n][n_head][hd], k [n][n_kv][hd], v [n][n_kv][hdv]
  k.rms_norm(r, x_, l.vector(W::kAttnNorm), h_, n_embd_, n, hp.rms_eps);
  mul(l.matrix(W::kAttnQ), h_, q_, n);
  if (lo.own_kv) {
    mul(l.matrix(W::kAttnK), h_, k_, n);
    if (lo.has_v) {
      mul(l.matrix(W::kAttnV), h_, v_, n);
    } else {  // the values are the keys' projection, before their norm and rope
      r.copy(k_, 0, v_, 0, size_t(n * kv_dim) * 4);
    }
  }
  if (l.has(W::kAttnQNorm)) {
    k.rms_norm(r, q_, l.vector(W::kAttnQNorm), q_, hd, n * n_head, hp.rms_eps);
  }
  const int64_t n_rot = host.rope.n_rot;
  const bool neox = s_.arch->rope_style == RopeStyle::kNeoxHalves;
  const vulkan::Buffer& angles = angles_[size_t(l.rope_group)];
  if (n_rot > 0) k.rope(r, q_, angles, {n, n_head, hd, n_rot, 0, neox});
  if (lo.own_kv) {
    if (l.has(W::kAttnKNorm)) {
      k.rms_norm(r, k_, l.vector(W::kAttnKNorm), k_, hd, n * n_kv, hp.rms_eps);
    }
    if (n_rot > 0) k.rope(r, k_, angles, {n, n_kv, hd, n_rot, 0, neox});
    if (s_.arch->v_norm) k.rms_norm(r, v_, ones_, v_, hdv, n * n_kv, hp.rms_eps);
    k.store_rows(r, k_, cache_rows(l), l.k_cache, kv_dim, n);
    k.store_rows(r, v_, cache_rows(l), l.v_cache, n_kv * hdv, n);
  }
  // A KV-shared layer reads its source layer's cache (written earlier in this step).
  record_attend(l, batch, q_, attn_, hd, hdv, n_kv, hd, false);
  mul(l.matrix(W::kAttnOutput), attn_, proj_, n);
  add_attention_output(l, n);
}

void VulkanBackend::record_moe_beside_dense(const DeviceLayer& l, int64_t n) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n_used = hp.n_expert_used, slots = n * n_used;
  // The layer's MLP over h = RMSNorm(x) * ffn_norm (record_ffn's): m [n][n_embd] in shared_.
  HERD_CHECK(l.host->ffn_runs);
  record_gated(l.matrix(W::kFfnGate), l.matrix(W::kFfnUp), l.matrix(W::kFfnDown), n,
               hp.swiglu_limit_shared, shared_);
  // The router reads RMSNorm(x) * ffn_gate_inp.scale / sqrt(n_embd) (folded at load).
  k.rms_norm(r, x_, l.vector(W::kRouterScale), proj_, n_embd_, n, hp.rms_eps);
  mul(l.matrix(W::kRouter), proj_, logits_, n);
  k.route(r, logits_, nullptr, ids_, weights_, router_shape(n));
  // The experts read RMSNorm(x) * pre_ffw_norm_2, in h (free again).
  k.rms_norm(r, x_, l.vector(W::kPreFfnNorm2), h_, n_embd_, n, hp.rms_eps);
  record_expert_products(l, n);
  // Each expert's output times its own scale: the router's weights times the chosen
  // experts' scales (gathered as one-float rows; the product is moe_combine of one expert).
  k.get_rows(r, TensorType::F32, l.vector(W::kDownExpsScale), ids_, expert_scales_, 1, slots);
  k.moe_combine(r, expert_scales_, weights_, scaled_weights_, 1, 1, slots);
  k.moe_combine(r, expert_out_, scaled_weights_, proj_, n_embd_, n_used, n);
  // f = RMSNorm(m) * post_ffw_norm_1 + RMSNorm(e) * post_ffw_norm_2, in proj.
  k.rms_norm(r, shared_, l.vector(W::kPostFfnNorm1), shared_, n_embd_, n, hp.rms_eps);
  k.rms_norm(r, proj_, l.vector(W::kPostFfnNorm2), proj_, n_embd_, n, hp.rms_eps);
  k.add(r, proj_, shared_, proj_, n * n_embd_);
}

void VulkanBackend::gather_per_layer_rows(const Batch& batch, float* up) const {
  // [n][layers][P]: each token's row of per_layer_token_embd, this shard's layers' parts,
  // times sqrt(P) and the 1/sqrt 2 of the sum they enter; then, in a stage after the first
  // (whose input is not the embedding), [n][n_embd] the tokens' scaled embeddings.
  const gguf::TensorInfo& table = *s_.per_layer_embd;
  const TypeTraits& tt = type_traits(table.type);
  const int64_t p = per_layer_, layers = s_.spec.layer_end - s_.spec.layer_begin;
  const size_t row = row_bytes(table.type, table.shape[0]), part = row_bytes(table.type, p);
  const float scale = std::sqrt(static_cast<float>(p)) * (1.0f / std::sqrt(2.0f));
  for (int64_t t = 0; t < batch.size(); ++t) {
    const uint8_t* token_row = table.data + row * size_t(batch.tokens[size_t(t)]);
    for (int64_t j = 0; j < layers; ++j) {
      float* e = up + (t * layers + j) * p;
      tt.dequantize(token_row + part * size_t(s_.spec.layer_begin + j), e, p);
      for (int64_t i = 0; i < p; ++i) e[i] *= scale;
    }
  }
  if (s_.spec.embedding) return;
  const gguf::TensorInfo& embd = *s_.token_embd;
  const size_t embd_row = row_bytes(embd.type, n_embd_);
  const float embd_scale = s_.arch->embed_scale ? std::sqrt(static_cast<float>(n_embd_)) : 1.0f;
  float* x = up + batch.size() * layers * p;
  for (int64_t t = 0; t < batch.size(); ++t) {
    float* xt = x + t * n_embd_;
    type_traits(embd.type).dequantize(embd.data + embd_row * size_t(batch.tokens[size_t(t)]), xt,
                                      n_embd_);
    for (int64_t i = 0; i < n_embd_; ++i) xt[i] *= embd_scale;
  }
}

void VulkanBackend::record_per_layer_inputs(int64_t n, size_t at) {
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t p = per_layer_, all = (s_.spec.layer_end - s_.spec.layer_begin) * p;
  // (RMSNorm(the scaled embedding through per_layer_model_proj) + row) / sqrt 2 per
  // layer, the 1/sqrt 2 in the norm's weights and the rows. The HF model scales the
  // projection by n_embd^-1/2 before its norm: the same as an epsilon n_embd times larger.
  // The embedding: x in the first stage; else the host's, into h (free until layer 0).
  if (!s_.spec.embedding) {
    r.copy(upload_, (at + size_t(n * all)) * 4, h_, 0, size_t(n * n_embd_) * 4);
  }
  mul(per_layer_proj_, s_.spec.embedding ? x_ : h_, per_layer_in_, n);
  const float eps = s_.hp.rms_eps * static_cast<float>(n_embd_);
  k.rms_norm(r, per_layer_in_, per_layer_norm_, per_layer_in_, p, n * all / p, eps);
  r.copy(upload_, at * 4, per_layer_tmp_, 0, size_t(n * all) * 4);
  k.add(r, per_layer_in_, per_layer_tmp_, per_layer_in_, n * all);
}

void VulkanBackend::record_layer_end(const DeviceLayer& l, int64_t n) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  if (per_layer_ > 0) {
    // x += RMSNorm(proj (gelu(inp_gate x) * this layer's input)) * post_norm
    const int64_t p = per_layer_, all = (s_.spec.layer_end - s_.spec.layer_begin) * p;
    const int64_t j = &l - layers_.data();
    mul(l.matrix(W::kPerLayerGate), x_, per_layer_gate_, n);
    k.copy_rows(r, per_layer_in_, per_layer_tmp_, n, p, all, j * p, p, 0);
    k.gated(r, vulkan::GatedActivation::kGeluTanhMul, per_layer_gate_, per_layer_tmp_,
            per_layer_gate_, n * p);
    mul(l.matrix(W::kPerLayerProj), per_layer_gate_, proj_, n);
    k.rms_norm(r, proj_, l.vector(W::kPerLayerPostNorm), proj_, n_embd_, n, hp.rms_eps);
    k.add(r, x_, proj_, x_, n * n_embd_);
  }
  if (!l.host->out_scale.empty()) k.scale(r, x_, l.host->out_scale[0], n * n_embd_);
}

}  // namespace herd::engine
