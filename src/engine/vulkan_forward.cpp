// The forward pass on a Vulkan device: the batch's inputs, rope angles and cache rows go up
// in one copy; every layer's operations are recorded as dispatches (vulkan/kernels.h) in the
// order shard.cpp runs them on the CPU; the logits (or a stage's activations) come back in
// one copy; the whole step is one submission.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/vulkan_backend.h"
#include "util/error.h"

namespace herd::engine {
namespace {

using vulkan::Buffer;
using W = LayerWeight;

vulkan::GatedActivation gated_kind(Activation a, float limit) {
  switch (a) {
    case Activation::kSilu:
      return limit > 0 ? vulkan::GatedActivation::kSiluClampMul : vulkan::GatedActivation::kSiluMul;
    case Activation::kGeluTanh:
      return vulkan::GatedActivation::kGeluTanhMul;
    case Activation::kSwigluOai:
      return vulkan::GatedActivation::kSwigluOaiMul;
  }
  return vulkan::GatedActivation::kSiluMul;
}

vulkan::RouterShape::Gating router_gating(Gating g) {
  switch (g) {
    case Gating::kSoftmax:
      return vulkan::RouterShape::kSoftmax;
    case Gating::kSigmoid:
      return vulkan::RouterShape::kSigmoid;
    case Gating::kSqrtSoftplus:
      return vulkan::RouterShape::kSqrtSoftplus;
  }
  return vulkan::RouterShape::kSoftmax;
}

uint32_t u32(int64_t v, const char* what) {
  if (v < 0 || v > int64_t(UINT32_MAX)) {
    throw Error("engine", std::string(what) + " " + std::to_string(v) +
                              " is beyond the Vulkan backend's 32-bit offsets");
  }
  return uint32_t(v);
}

}  // namespace

void VulkanBackend::mul(const DeviceMatrix& w, const Buffer& x, const Buffer& y, int64_t n) {
  // A tiled product past a few tokens (each weight tile read once per tile of tokens),
  // matvec below (Kernels picks).
  kernels_->matmul(*recorder_, w.type, w.buffer, x, y, w.rows, w.cols, n);
}

void VulkanBackend::reduce_projection(int64_t n, bool zeros) {
  vulkan::Recorder& r = *recorder_;
  const size_t count = size_t(n * n_embd_);
  auto* host = reinterpret_cast<float*>(download_.mapped());
  if (!zeros) r.copy(proj_, 0, download_, 0, count * 4);
  r.submit_and_wait();
  if (zeros) std::fill_n(host, count, 0.0f);
  all_reduce_->sum(host, count);
  // The step's input rows at the start of the upload buffer went to the device already.
  std::memcpy(upload_.mapped(), host, count * 4);
  r.begin();
  r.copy(upload_, 0, proj_, 0, count * 4);
}

void VulkanBackend::forward(const Batch& batch, const float* input, std::vector<float>& output,
                            AllReduce* all_reduce) {
  const HParams& hp = s_.hp;
  const ArchSpec& arch = *s_.arch;
  const int64_t n = batch.size(), width = hp.hidden_width();
  std::lock_guard<std::mutex> lock(runtime_->mutex);
  reserve(n);
  all_reduce_ = all_reduce;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;

  // ---- the step's uploads, written in place into the host-visible staging buffer:
  // [n][width] input | per rope group [n][n_rot] angles | [n] cache rows | per other cache
  // width [n] rows | [n][layers][P] per-layer embedding rows
  HERD_CHECK(upload_.mapped() != nullptr && download_.mapped() != nullptr);
  float* up = reinterpret_cast<float*>(upload_.mapped());
  if (s_.spec.embedding) {
    const TypeTraits& tt = type_traits(s_.token_embd->type);
    const size_t row = row_bytes(s_.token_embd->type, n_embd_);
    const float scale = arch.embed_scale ? std::sqrt(static_cast<float>(n_embd_)) : 1.0f;
    for (int64_t t = 0; t < n; ++t) {
      float* xt = up + t * width;  // one copy per residual stream (hyper-connections)
      tt.dequantize(s_.token_embd->data + row * size_t(batch.tokens[t]), xt, n_embd_);
      if (scale != 1.0f) {
        for (int64_t i = 0; i < n_embd_; ++i) xt[i] *= scale;
      }
      for (int64_t c = n_embd_; c < width; c += n_embd_) std::copy_n(xt, n_embd_, xt + c);
    }
  } else {
    HERD_CHECK(input != nullptr);
    std::memcpy(up, input, size_t(n * width) * 4);
  }
  size_t at = size_t(n * width);
  std::vector<size_t>& angles_at = angles_at_;  // sized at load: nothing allocated per step
  for (size_t g = 0; g < ropes_.size(); ++g) {
    const int64_t n_rot = ropes_[g]->n_rot;
    angles_at[g] = at;
    for (int64_t t = 0; t < n && n_rot > 0; ++t) {
      float* a = up + at + t * n_rot;
      rope_angles(*ropes_[g], batch.pos[t], a, a + n_rot / 2);
    }
    at += size_t(n * n_rot);
  }
  const size_t rows_at = at;
  auto* rows = reinterpret_cast<uint32_t*>(up + rows_at);
  const int64_t n_ctx = s_.kv.n_ctx();
  for (int64_t t = 0; t < n; ++t) {
    rows[t] = u32((int64_t(batch.seq[t]) * n_ctx + batch.pos[t]) * kv_dim_, "cache element");
    for (size_t g = 0; g < row_widths_.size(); ++g) {
      rows[int64_t(g + 1) * n + t] =
          u32((int64_t(batch.seq[t]) * n_ctx + batch.pos[t]) * row_widths_[g], "cache element");
    }
  }
  const size_t per_layer_at = rows_at + (row_widths_.size() + 1) * size_t(n);
  if (per_layer_ > 0) gather_per_layer_rows(batch, up + per_layer_at);

  r.begin();
  r.copy(upload_, 0, x_, 0, size_t(n * width) * 4);
  for (size_t g = 0; g < ropes_.size(); ++g) {
    if (ropes_[g]->n_rot > 0) {
      r.copy(upload_, angles_at[g] * 4, angles_[g], 0, size_t(n * ropes_[g]->n_rot) * 4);
    }
  }
  r.copy(upload_, rows_at * 4, k_rows_, 0, size_t(n) * 4);
  for (size_t g = 0; g < row_widths_.size(); ++g) {
    r.copy(upload_, (rows_at + (g + 1) * size_t(n)) * 4, width_rows_[g], 0, size_t(n) * 4);
  }
  if (per_layer_ > 0) record_per_layer_inputs(n, per_layer_at);
  if (ds4_) begin_ds4(batch);

  for (const DeviceLayer& l : layers_) {
    if (ds4_) {
      record_ds4_layer(l, batch);
      continue;
    }
    record_attention(l, batch);
    record_ffn(l, n);
    if (per_layer_ > 0 || arch.layer_output_scale) record_layer_end(l, n);
  }

  // ---- the output: a stage's activations, or the logits of the tokens that want them
  if (!s_.spec.output) {
    r.copy(x_, 0, download_, 0, size_t(n * width) * 4);
    r.submit_and_wait();
    const auto* got = reinterpret_cast<const float*>(download_.mapped());
    output.assign(got, got + n * width);
    return;
  }
  if (ds4_) record_hc_head(n);  // x [n][n_embd]: the streams reduced
  int64_t m = 0;
  for (int64_t t = 0; t < n; ++t) m += batch.want_logits[t] ? 1 : 0;
  if (m < n) {  // the wanted rows, gathered into h
    for (int64_t t = 0, j = 0; t < n; ++t) {
      if (!batch.want_logits[t]) continue;
      r.copy(x_, size_t(t * n_embd_) * 4, h_, size_t(j * n_embd_) * 4, size_t(n_embd_) * 4);
      ++j;
    }
  }
  output.resize(size_t(m * s_.n_vocab));
  if (m == 0 || s_.n_vocab == 0) {
    r.submit_and_wait();  // the cache rows are written all the same
    return;
  }
  k.rms_norm(r, m < n ? h_ : x_, output_norm_, h_, n_embd_, m, hp.rms_eps);
  mul(output_, h_, out_, m);
  r.copy(out_, 0, download_, 0, size_t(m * s_.n_vocab) * 4);
  r.submit_and_wait();
  std::memcpy(output.data(), download_.mapped(), output.size() * 4);
  if (hp.final_softcap > 0) {
    const float cap = hp.final_softcap;
    for (float& logit : output) logit = cap * std::tanh(logit / cap);
  }
}

void VulkanBackend::record_attention(const DeviceLayer& l, const Batch& batch) {
  const HParams& hp = s_.hp;
  const ArchSpec& arch = *s_.arch;
  const Layer& host = *l.host;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n = batch.size(), hd = hp.head_dim, n_head = s_.n_head, n_kv = s_.n_head_kv;
  if (host.options.linear) {
    record_linear(l, batch);
    return;
  }
  if (n_head == 0) {  // a tensor-parallel rank without heads adds zeros to the others'
    reduce_projection(n, true);
    add_attention_output(l, n);
    return;
  }
  if (arch.layer_shapes) {  // Gemma 4: vulkan_gemma4.cpp
    record_shaped_attention(l, batch);
    return;
  }
  if (mla_) {
    k.rms_norm(r, x_, l.vector(W::kAttnNorm), h_, n_embd_, n, hp.rms_eps);
    record_mla(l, batch);
    mul(l.matrix(W::kAttnOutput), attn_, proj_, n);
    if (s_.partial_sums) reduce_projection(n, false);
    add_attention_output(l, n);
    return;
  }
  k.rms_norm(r, x_, l.vector(W::kAttnNorm), h_, n_embd_, n, hp.rms_eps);
  if (arch.attn_output_gate) {
    record_gated_query(l, n);
  } else {
    mul(l.matrix(W::kAttnQ), h_, q_, n);
  }
  mul(l.matrix(W::kAttnK), h_, k_, n);
  mul(l.matrix(W::kAttnV), h_, v_, n);
  if (l.has(W::kAttnQBias)) k.add_bias(r, q_, l.vector(W::kAttnQBias), q_dim_, n);
  if (l.has(W::kAttnKBias)) k.add_bias(r, k_, l.vector(W::kAttnKBias), kv_dim_, n);
  if (l.has(W::kAttnVBias)) k.add_bias(r, v_, l.vector(W::kAttnVBias), kv_dim_, n);
  // Per head, or over the whole row (MiniMax-M2).
  const bool whole_row = arch.qk_norm_whole_row;
  if (l.has(W::kAttnQNorm)) {
    k.rms_norm(r, q_, l.vector(W::kAttnQNorm), q_, whole_row ? q_dim_ : hd,
               whole_row ? n : n * n_head, hp.rms_eps);
  }
  if (l.has(W::kAttnKNorm)) {
    k.rms_norm(r, k_, l.vector(W::kAttnKNorm), k_, whole_row ? kv_dim_ : hd,
               whole_row ? n : n * n_kv, hp.rms_eps);
  }
  const int64_t n_rot = host.rope.n_rot;
  if (n_rot > 0) {
    const bool neox = arch.rope_style == RopeStyle::kNeoxHalves;
    const Buffer& angles = angles_[size_t(l.rope_group)];
    k.rope(r, q_, angles, {n, n_head, hd, n_rot, 0, neox});
    k.rope(r, k_, angles, {n, n_kv, hd, n_rot, 0, neox});
  }
  k.store_rows(r, k_, k_rows_, l.k_cache, kv_dim_, n);
  k.store_rows(r, v_, k_rows_, l.v_cache, kv_dim_, n);

  record_attend(l, batch, q_, attn_, hd, hd, n_kv, hd, false);
  if (arch.attn_output_gate) k.sigmoid_mul(r, attn_, attn_gate_, n * q_dim_, 1);
  mul(l.matrix(W::kAttnOutput), attn_, proj_, n);
  if (s_.partial_sums) reduce_projection(n, false);
  add_attention_output(l, n);
}

void VulkanBackend::record_attend(const DeviceLayer& l, const Batch& batch, const Buffer& q,
                                  const Buffer& out, int64_t k_dim, int64_t v_dim, int64_t n_kv,
                                  int64_t head_stride, bool values_in_keys) {
  const Layer& host = *l.host;
  const int64_t n = batch.size(), n_head = s_.n_head, n_ctx = s_.kv.n_ctx();
  std::optional<vulkan::Binding> sinks;
  if (l.has(W::kAttnSinks)) sinks.emplace(l.vector(W::kAttnSinks));
  // The cache of the layer it reads (Gemma 4's KV-shared layers: an earlier one's).
  const DeviceLayer& c = layers_[l.kv_layer];
  const Buffer& values = values_in_keys ? c.k_cache : c.v_cache;
  // Per run of one sequence's consecutive positions, cut into calls whose scores fit.
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;
    while (t1 < n && batch.seq[t1] == batch.seq[t0] && batch.pos[t1] == batch.pos[t1 - 1] + 1) {
      ++t1;
    }
    for (int64_t c0 = t0; c0 < t1;) {
      // Tokens [c0, c1): each scores at most pos(c1 - 1) + 1 positions.
      int64_t c1 = c0 + 1;
      while (c1 < t1 && (c1 - c0 + 1) * n_head * (batch.pos[c1] + 1) <= scores_floats_) ++c1;
      vulkan::AttentionShape a;
      a.n_head = n_head;
      a.n_kv_head = n_kv;
      a.n_tokens = c1 - c0;
      a.pos0 = batch.pos[c0];
      a.n_pos = batch.pos[c1 - 1] + 1;
      a.k_dim = k_dim;
      a.v_dim = v_dim;
      a.stride = c.kv_dim;
      a.head_stride = head_stride;
      a.scale = host.attn_scale;
      a.window = host.options.sliding ? s_.hp.sliding_window : 0;
      a.q_offset = c0 * n_head * k_dim;
      a.out_offset = c0 * n_head * v_dim;
      a.kv_offset = int64_t(batch.seq[c0]) * n_ctx * c.kv_dim;
      kernels_->attend(*recorder_, q, c.k_cache, values, sinks ? &*sinks : nullptr, scores_, out,
                       a);
      c0 = c1;
    }
    t0 = t1;
  }
}

void VulkanBackend::add_attention_output(const DeviceLayer& l, int64_t n) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  // Once the ranks' shares are summed: the bias (added once), the sandwich norm, the residual.
  if (l.has(W::kAttnOutputBias)) k.add_bias(r, proj_, l.vector(W::kAttnOutputBias), n_embd_, n);
  if (l.has(W::kPostAttnNorm)) {
    k.rms_norm(r, proj_, l.vector(W::kPostAttnNorm), proj_, n_embd_, n, hp.rms_eps);
  }
  k.add(r, x_, proj_, x_, n * n_embd_);
}

void VulkanBackend::record_gated(const DeviceMatrix& gate, const DeviceMatrix& up,
                                 const DeviceMatrix& down, int64_t n, float limit,
                                 const Buffer& out) {
  mul(gate, h_, ffn_a_, n);
  mul(up, h_, ffn_b_, n);
  kernels_->gated(*recorder_, gated_kind(s_.arch->activation, limit), ffn_a_, ffn_b_, ffn_a_,
                  n * gate.rows, limit);
  mul(down, ffn_a_, out, n);
}

vulkan::RouterShape VulkanBackend::router_shape(int64_t n) const {
  const RouterOptions o = router_options(s_.hp);
  vulkan::RouterShape route;
  route.gating = router_gating(o.gating);
  route.n_tokens = n;
  route.n_expert = s_.hp.n_expert;
  route.n_used = s_.hp.n_expert_used;
  route.norm_weights = o.norm_weights;
  route.weights_scale = o.weights_scale;
  route.n_group = o.n_group;
  route.n_group_used = o.n_group_used;
  return route;
}

void VulkanBackend::record_experts(const DeviceLayer& l, int64_t n) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n_expert = hp.n_expert, n_used = hp.n_expert_used;
  mul(l.matrix(W::kRouter), h_, logits_, n);
  if (l.has(W::kRouterBias)) k.add_bias(r, logits_, l.vector(W::kRouterBias), n_expert, n);
  std::optional<vulkan::Binding> selection;
  if (l.has(W::kSelectionBias)) selection.emplace(l.vector(W::kSelectionBias));
  if (l.host->options.hash_routed) {
    record_hash_route(l, n);
  } else {
    k.route(r, logits_, selection ? &*selection : nullptr, ids_, weights_, router_shape(n));
  }
  // A rank holding some experts: the others' slots give 0 here, their ranks' sums bring them.
  if (expert_index_.bytes() > 0) k.remap_experts(r, ids_, expert_index_, n * n_used);
  record_expert_products(l, n);
  k.moe_combine(r, expert_out_, weights_, proj_, n_embd_, n_used, n);
}

void VulkanBackend::record_expert_products(const DeviceLayer& l, int64_t n) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n_used = hp.n_expert_used;
  const DeviceMatrix& gate = l.matrix(W::kGateExps);
  const DeviceMatrix& up = l.matrix(W::kUpExps);
  const DeviceMatrix& down = l.matrix(W::kDownExps);
  vulkan::ExpertShape shape;
  shape.n_expert = gate.n_expert;
  shape.rows = gate.rows;
  shape.cols = gate.cols;
  shape.n_tokens = n;
  shape.n_used = n_used;
  // Where this rank holds only some experts, the others' slots must read 0: matvec_experts
  // writes them, the tiled product (which gathers each expert's slots) leaves them.
  const bool some = expert_index_.bytes() > 0;
  auto experts = [&](const DeviceMatrix& w, const Buffer& x, const Buffer& y,
                     const vulkan::ExpertShape& e) {
    if (some) {
      k.matvec_experts(r, w.type, w.buffer, x, ids_, y, e);
    } else {
      k.matmul_experts(r, w.type, w.buffer, x, ids_, y, e);
    }
  };
  experts(gate, h_, ffn_a_, shape);
  shape.n_expert = up.n_expert;
  experts(up, h_, ffn_b_, shape);
  const int64_t slots = n * n_used;
  if (l.has(W::kGateExpsBias)) {
    k.add_expert_bias(r, ffn_a_, l.vector(W::kGateExpsBias), ids_, gate.rows, slots);
  }
  if (l.has(W::kUpExpsBias)) {
    k.add_expert_bias(r, ffn_b_, l.vector(W::kUpExpsBias), ids_, up.rows, slots);
  }
  k.gated(r, gated_kind(s_.arch->activation, hp.swiglu_limit), ffn_a_, ffn_b_, ffn_a_,
          slots * gate.rows, hp.swiglu_limit);
  vulkan::ExpertShape down_shape = shape;
  down_shape.n_expert = down.n_expert;
  down_shape.rows = down.rows;
  down_shape.cols = down.cols;
  down_shape.x_per_slot = true;
  experts(down, ffn_a_, expert_out_, down_shape);
  if (l.has(W::kDownExpsBias)) {
    k.add_expert_bias(r, expert_out_, l.vector(W::kDownExpsBias), ids_, n_embd_, slots);
  }
}

void VulkanBackend::record_ffn(const DeviceLayer& l, int64_t n) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const Layer& host = *l.host;
  k.rms_norm(r, x_, l.vector(W::kFfnNorm), h_, n_embd_, n, hp.rms_eps);
  // What this shard adds to proj: routed experts it holds, shared experts or the dense FFN
  // where it runs them (a tensor-parallel rank may have none of these: zeros).
  bool wrote = false;
  const bool beside = host.options.moe && s_.arch->moe_beside_dense;
  if (beside) {  // Gemma 4: vulkan_gemma4.cpp
    record_moe_beside_dense(l, n);
    wrote = true;
  }
  if (!beside && host.options.moe && l.has(W::kGateExps)) {
    record_experts(l, n);
    wrote = true;
  }
  // The dense FFN, or an MoE layer's shared experts (every token, weight 1).
  if (!beside && host.ffn_runs) {
    record_gated(l.matrix(W::kFfnGate), l.matrix(W::kFfnUp), l.matrix(W::kFfnDown), n,
                 hp.swiglu_limit_shared, wrote ? shared_ : proj_);
    if (l.has(W::kSharedExpertGate)) record_shared_expert_gate(l, wrote ? shared_ : proj_, n);
    if (wrote) k.add(r, proj_, shared_, proj_, n * n_embd_);
    wrote = true;
  }
  if (s_.partial_sums) {
    reduce_projection(n, !wrote);
  } else {
    HERD_CHECK(wrote);
  }
  if (l.has(W::kPostFfnNorm)) {
    k.rms_norm(r, proj_, l.vector(W::kPostFfnNorm), proj_, n_embd_, n, hp.rms_eps);
  }
  k.add(r, x_, proj_, x_, n * n_embd_);
}

}  // namespace herd::engine
