// Gated DeltaNet (Qwen3-Next, Qwen3.5 / 3.6) on a Vulkan device, in shard_linear.cpp's and
// delta_net.cpp's order: the layer's projections, then per run of one sequence's tokens the
// causal conv and the gated delta rule (vulkan/kernels.h delta_conv, delta_rule) on the
// slot's recurrent states, which stay in device memory ([n_seq][RecurrentShape::floats()]
// per linear layer); the output projection and the residual. The shard keeps checking on
// the host that a batch continues each slot where its states stand (KvCache's
// begin_recurrent); a run at position 0 starts its states afresh on the device. Beside it the
// hybrid models' other two gates: the attention output's (per element, from the query
// projection's second half of each head) and the shared expert's (one per token).
#include <algorithm>

#include "engine/vulkan_backend.h"
#include "util/error.h"

namespace herd::engine {

using W = LayerWeight;

void VulkanBackend::reserve_delta(int64_t n) {
  const ArchSpec& arch = *s_.arch;
  auto floats = [&](int64_t count, const char* what) {
    return make_buffer(size_t(std::max<int64_t>(count, 1)) * 4, what);
  };
  if (arch.delta_net) {
    const DeltaNetDims& d = s_.delta_dims;
    delta_qkv_ = floats(n * d.conv_dim(), "DeltaNet qkv");
    delta_conv_ = floats(n * d.conv_dim(), "DeltaNet conv outputs");
    delta_z_ = floats(n * d.value_dim(), "DeltaNet output gates");
    delta_out_ = floats(n * d.value_dim(), "DeltaNet outputs");
    delta_b_ = floats(n * 2 * d.n_v_heads, "DeltaNet beta and alpha");
    delta_alpha_ = floats(n * d.n_v_heads, "DeltaNet alpha");
  }
  if (arch.attn_output_gate) {
    gate_q_ = floats(n * 2 * q_dim_, "gated queries");
    attn_gate_ = floats(n * q_dim_, "attention output gates");
  }
  if (arch.shared_expert_gate) shexp_logits_ = floats(n, "shared expert gates");
}

void VulkanBackend::record_linear(const DeviceLayer& l, const Batch& batch) {
  const HParams& hp = s_.hp;
  const DeltaNetDims& d = s_.delta_dims;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n = batch.size(), n_v = d.n_v_heads;
  k.rms_norm(r, x_, l.vector(W::kAttnNorm), h_, n_embd_, n, hp.rms_eps);
  mul(l.matrix(W::kDeltaQkv), h_, delta_qkv_, n);
  mul(l.matrix(W::kDeltaZ), h_, delta_z_, n);
  vulkan::DeltaNetShape s;
  s.n_k = d.n_k_heads;
  s.n_v = n_v;
  s.dk = d.dk;
  s.dv = d.dv;
  s.conv_kernel = d.conv_kernel;
  s.tiled = s_.arch->delta_v_tiled;
  s.eps = d.rms_eps;
  // ssm_ba's rows as the shard holds them: [b of the V heads | alpha of them].
  const bool fused = l.has(W::kDeltaBa);
  if (fused) {
    mul(l.matrix(W::kDeltaBa), h_, delta_b_, n);
    s.b_stride = s.alpha_stride = 2 * n_v;
    s.alpha_offset = n_v;
  } else {
    mul(l.matrix(W::kDeltaBeta), h_, delta_b_, n);
    mul(l.matrix(W::kDeltaAlpha), h_, delta_alpha_, n);
    s.b_stride = s.alpha_stride = n_v;
  }
  const vulkan::Buffer& alpha = fused ? delta_b_ : delta_alpha_;
  const int64_t floats = d.state_shape().floats();
  // Runs: maximal blocks of one slot's tokens, in batch order (the shard checked that they
  // continue its states); each reads the states the one before it left.
  for (int64_t t0 = 0; t0 < n;) {
    int64_t t1 = t0 + 1;
    while (t1 < n && batch.seq[t1] == batch.seq[t0]) ++t1;
    s.t0 = t0;
    s.n_tokens = t1 - t0;
    s.state_offset = int64_t(batch.seq[t0]) * floats;
    s.fresh = batch.pos[t0] == 0;
    k.delta_conv(r, delta_qkv_, l.vector(W::kDeltaConv), l.states, delta_conv_, s);
    k.delta_rule(r, delta_conv_, delta_b_, alpha, delta_z_, l.vector(W::kDeltaDtBias),
                 l.vector(W::kDeltaA), l.vector(W::kDeltaNorm), l.states, delta_out_, s);
    t0 = t1;
  }
  mul(l.matrix(W::kDeltaOut), delta_out_, proj_, n);
  add_attention_output(l, n);
}

void VulkanBackend::record_gated_query(const DeviceLayer& l, int64_t n) {
  const int64_t hd = s_.hp.head_dim, rows = n * s_.n_head;
  vulkan::Kernels& k = *kernels_;
  // Each head's rows are [q | gate]: the queries close up into q_, the gates into attn_gate_.
  mul(l.matrix(W::kAttnQ), h_, gate_q_, n);
  k.copy_rows(*recorder_, gate_q_, q_, rows, hd, 2 * hd, 0, hd, 0);
  k.copy_rows(*recorder_, gate_q_, attn_gate_, rows, hd, 2 * hd, hd, hd, 0);
}

void VulkanBackend::record_shared_expert_gate(const DeviceLayer& l, const vulkan::Buffer& shared,
                                              int64_t n) {
  // sigmoid(ffn_gate_inp_shexp . h) per token: a product with a one-row F32 matrix.
  kernels_->matmul(*recorder_, TensorType::F32, l.vector(W::kSharedExpertGate), h_, shexp_logits_,
                   1, n_embd_, n);
  kernels_->sigmoid_mul(*recorder_, shared, shexp_logits_, n * n_embd_, n_embd_);
}

size_t VulkanBackend::recurrent_layers() const {
  size_t n = 0;
  for (const DeviceLayer& l : layers_) n += l.states.bytes() > 0 ? 1 : 0;
  return n;
}

void VulkanBackend::download_states(int32_t seq, std::vector<float>& rows) {
  std::lock_guard<std::mutex> lock(runtime_->mutex);
  const size_t floats = size_t(s_.delta_dims.state_shape().floats());
  rows.resize(recurrent_layers() * floats);
  size_t at = 0;
  for (const DeviceLayer& l : layers_) {
    if (l.states.bytes() == 0) continue;
    vulkan::download(*context_, l.states, rows.data() + at, floats * 4, size_t(seq) * floats * 4);
    at += floats;
  }
}

void VulkanBackend::upload_states(int32_t seq, const std::vector<float>& rows) {
  std::lock_guard<std::mutex> lock(runtime_->mutex);
  const size_t floats = size_t(s_.delta_dims.state_shape().floats());
  const size_t n_layers = recurrent_layers();
  if (rows.size() != n_layers * floats) {
    throw Error("engine", "a recurrent snapshot of " + std::to_string(rows.size()) +
                              " floats does not fit this device shard's " +
                              std::to_string(n_layers) + " layers of " + std::to_string(floats));
  }
  size_t at = 0;
  for (DeviceLayer& l : layers_) {
    if (l.states.bytes() == 0) continue;
    vulkan::upload(*context_, l.states, rows.data() + at, floats * 4, size_t(seq) * floats * 4);
    at += floats;
  }
}

}  // namespace herd::engine
