// The sizes of a shard's scratch: every buffer of the forward pass for n tokens (the layers'
// widest head sizes, FFN and expert rows, attention chunks, Gated DeltaNet's and
// hyper-connections' buffers, per-layer inputs), allocated at load and grown only by a larger
// batch.
#include <algorithm>
#include <utility>

#include "engine/shard_state.h"

namespace herd::engine {

int64_t Shard::State::max_heads_per_call() const {
  // MLA: every head reads the one latent, so all heads are one call (the kernel widens each
  // cached row once for all of them); decode cuts its positions over the threads instead.
  if (arch->attention == AttentionKind::kMla) return std::max<int64_t>(1, n_head);
  int64_t most = 1;
  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    most = std::max(most, hp.n_head / layer_options(*arch, hp, il).n_head_kv);
  }
  return most;
}

int64_t Shard::State::max_head_dim() const {
  int64_t most = hp.head_dim;
  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    most = std::max(most, layer_options(*arch, hp, il).head_dim);
  }
  return most;
}

int64_t Shard::State::max_ff() const {
  int64_t most = 0;
  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    most = std::max(most, layer_options(*arch, hp, il).n_ff);
  }
  return most;
}

int64_t Shard::State::scores_per_thread() const {
  const int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : hp.n_ctx;
  if (arch->attention == AttentionKind::kMla) {
    return kernels::attend_scratch_floats(max_heads_per_call(), n_ctx, hp.kv_lora_rank + hp.n_rot,
                                          hp.kv_lora_rank);
  }
  const int64_t hd = max_head_dim();
  return kernels::attend_scratch_floats(max_heads_per_call(), n_ctx, hd, hd);
}

ScratchSizes Shard::State::scratch_sizes(int64_t n, int n_threads) const {
  const HParams& p = hp;
  const size_t t = static_cast<size_t>(n);
  ScratchSizes z;
  int64_t widest_ff = n_ff;  // the experts' rows, the dense layers' or shared experts' rows
  if (p.n_expert > 0 && p.n_ff_expert > 0) {
    widest_ff = std::max(widest_ff, n_ff * std::max<int64_t>(1, max_ff() / p.n_ff_expert));
    widest_ff = std::max(widest_ff, n_ff * p.n_expert_shared);
  }
  // A whole shard holds each layer's whole dense FFN (Gemma 4's differ per layer, and its
  // experts' width need not divide them).
  if (!partial_sums) widest_ff = std::max(widest_ff, max_ff());
  const int64_t hd = arch->attention == AttentionKind::kMla ? p.head_dim : max_head_dim();
  const int64_t hdv = arch->attention == AttentionKind::kMla ? p.head_dim_v : hd;
  z.x = t * static_cast<size_t>(p.hidden_width());
  z.h = z.ffn_out = t * static_cast<size_t>(p.n_embd);
  if (arch->hyper_connections) {
    z.hc_flat = z.x;
    z.hc_mixes = z.hc_coeffs = t * static_cast<size_t>(p.n_hc_mixes());
  }
  z.q = t * static_cast<size_t>(n_head * hd);
  z.attn = t * static_cast<size_t>(n_head * hdv);
  z.ffn_a = z.ffn_b = t * static_cast<size_t>(widest_ff);
  z.scores = static_cast<size_t>(n_threads) * static_cast<size_t>(scores_per_thread());
  // attend_cached cuts calls only when there are fewer than threads: under 2 * n_threads
  // (call, chunk) pairs, of at most every head each.
  const int64_t v_dim_kernel =
      arch->attention == AttentionKind::kMla ? p.kv_lora_rank : p.head_dim_v;
  z.attn_chunks = 2 * static_cast<size_t>(n_threads) *
                  static_cast<size_t>(max_heads_per_call() * (v_dim_kernel + 2));
  if (arch->attention == AttentionKind::kMla) {
    const int64_t latent = p.kv_lora_rank + p.n_rot, nope = p.head_dim - p.n_rot;
    z.k = t * static_cast<size_t>(latent);
    z.v = t * static_cast<size_t>(p.q_lora_rank);
    z.mla_q = t * static_cast<size_t>(n_head * latent);
    z.mla_o = t * static_cast<size_t>(n_head * p.kv_lora_rank);
    z.mla_in = t * static_cast<size_t>(n_head * std::max(nope, p.kv_lora_rank));
    z.mla_out = t * static_cast<size_t>(n_head * std::max(p.kv_lora_rank, p.head_dim_v));
  } else {
    z.k = t * static_cast<size_t>(n_head_kv * hd);
    z.v = t * static_cast<size_t>(n_head_kv * hdv);
  }
  if (arch->attn_output_gate) {
    z.attn_gate = t * static_cast<size_t>(n_head * p.head_dim);
    z.q *= 2;  // [q | gate] per head, before they are split
  }
  if (arch->delta_net) {
    const DeltaNetDims& d = delta_dims;
    z.delta_qkv = t * static_cast<size_t>(d.conv_dim());
    z.delta_z = t * static_cast<size_t>(d.value_dim());
    z.delta_ba = t * static_cast<size_t>(2 * d.n_v_heads);
    z.delta_out = t * static_cast<size_t>(std::max(d.value_dim(), 2 * d.n_v_heads));
    z.delta_mix_bytes = DeltaNetScratch::bytes_for(d, n, n_threads);
  }
  if (p.n_expert > 0) {
    z.router_logits = t * static_cast<size_t>(p.n_expert);
    z.moe_in = z.moe_out = z.moe_acc = t * static_cast<size_t>(p.n_embd);
    z.moe_a = z.moe_b = t * static_cast<size_t>(n_ff);
    z.moe_choices = t * static_cast<size_t>(p.n_expert_used);
  }
  if (qk_row_sums()) z.qk_sums = 2 * t;
  if (p.n_embd_per_layer > 0) {
    z.per_layer = t * static_cast<size_t>((spec.layer_end - spec.layer_begin) * p.n_embd_per_layer);
    z.per_layer_a = t * static_cast<size_t>(p.n_embd_per_layer);
  }
  if (arch->moe_beside_dense && p.n_expert > 0) z.router_in = t * static_cast<size_t>(p.n_embd);
  return z;
}

size_t ScratchSizes::bytes() const {
  const size_t floats = x + h + q + k + v + attn + ffn_a + ffn_b + ffn_out + router_logits +
                        scores + attn_chunks + mla_q + mla_o + mla_in + mla_out + moe_in + moe_a +
                        moe_b + moe_out + moe_acc + 2 * moe_choices + qk_sums + attn_gate +
                        delta_qkv + delta_z + delta_ba + delta_out + hc_flat + hc_mixes +
                        hc_coeffs + per_layer + per_layer_a + router_in;
  // The matmul workspace holds activations quantized to 8 bits: at most a byte per float of
  // the widest input, plus block scales.
  const size_t widest = std::max({x, q, attn, ffn_a, mla_in, mla_o, delta_out, per_layer_a});
  return floats * sizeof(float) + widest + widest / 8 + delta_mix_bytes;
}

void Shard::State::reserve(int64_t n, int n_threads) {
  if (n <= capacity && static_cast<int>(scores.size()) > 0 &&
      n_threads * scores_per_thread() <= static_cast<int64_t>(scores.size()) &&
      scratch_sizes(1, n_threads).attn_chunks <= attn_chunks.size())
    return;
  n = std::max(n, capacity);
  const ScratchSizes z = scratch_sizes(n, n_threads);
  auto grow = [](auto& buf, size_t size) {
    if (buf.size() < size) buf.resize(size);
  };
  for (auto [buf, size] : {std::pair{&x, z.x},
                           {&h, z.h},
                           {&q, z.q},
                           {&k, z.k},
                           {&v, z.v},
                           {&attn, z.attn},
                           {&ffn_a, z.ffn_a},
                           {&ffn_b, z.ffn_b},
                           {&ffn_out, z.ffn_out},
                           {&router_logits, z.router_logits},
                           {&scores, z.scores},
                           {&attn_chunks, z.attn_chunks},
                           {&mla_q, z.mla_q},
                           {&mla_o, z.mla_o},
                           {&mla_in, z.mla_in},
                           {&mla_out, z.mla_out},
                           {&moe_in, z.moe_in},
                           {&moe_a, z.moe_a},
                           {&moe_b, z.moe_b},
                           {&moe_out, z.moe_out},
                           {&moe_acc, z.moe_acc},
                           {&qk_sums, z.qk_sums},
                           {&moe_weights, z.moe_choices},
                           {&moe_row_weights, z.moe_choices},
                           {&attn_gate, z.attn_gate},
                           {&delta_qkv_buf, z.delta_qkv},
                           {&delta_z_buf, z.delta_z},
                           {&delta_ba_buf, z.delta_ba},
                           {&delta_out_buf, z.delta_out},
                           {&hc_flat, z.hc_flat},
                           {&hc_mixes, z.hc_mixes},
                           {&hc_coeffs, z.hc_coeffs},
                           {&per_layer, z.per_layer},
                           {&per_layer_a, z.per_layer_a},
                           {&router_in, z.router_in}}) {
    grow(*buf, size);
  }
  if (arch->delta_net) delta_scratch.reserve(delta_dims, n, n_threads);
  grow(moe_experts, z.moe_choices);
  grow(moe_rows, z.moe_choices);
  capacity = n;
}

}  // namespace herd::engine
