// Multi-head latent attention on a Vulkan device, in the absorbed form of
// shard_attention.cpp's mla_attention: the cache holds per token the normed latent c and one
// roped key k_r; each head's query goes into latent space through its k_b (W_k,h^T), attends
// over [c | k_r] rows with c as values, and its result leaves latent space through its v_b.
// The per-head products run as experts chosen by id (slot j of a token is head j).
#include "engine/vulkan_backend.h"

namespace herd::engine {

using W = LayerWeight;

void VulkanBackend::record_mla(const DeviceLayer& l, const Batch& batch) {
  const HParams& hp = s_.hp;
  vulkan::Kernels& k = *kernels_;
  vulkan::Recorder& r = *recorder_;
  const int64_t n = batch.size(), n_head = s_.n_head, hd = hp.head_dim, n_rot = hp.n_rot;
  const int64_t nope = hd - n_rot, kv_lora = hp.kv_lora_rank, latent = kv_dim_;
  const bool neox = s_.arch->rope_style == RopeStyle::kNeoxHalves;
  const vulkan::Buffer& angles = angles_[size_t(l.rope_group)];
  // q: [n][n_head][nope | rope], through the query latent where the model has one.
  if (l.has(W::kAttnQA)) {
    const int64_t q_lora = hp.q_lora_rank;
    mul(l.matrix(W::kAttnQA), h_, mla_a_, n);
    k.rms_norm(r, mla_a_, l.vector(W::kAttnQANorm), mla_a_, q_lora, n, hp.rms_eps);
    mul(l.matrix(W::kAttnQB), mla_a_, q_, n);
  } else {
    mul(l.matrix(W::kAttnQB), h_, q_, n);
  }
  // k: [n][kv_lora | rope]: the latent normed (through a dense copy), its key roped, cached.
  mul(l.matrix(W::kAttnKvA), h_, k_, n);
  k.copy_rows(r, k_, mla_a_, n, kv_lora, latent, 0, kv_lora, 0);
  k.rms_norm(r, mla_a_, l.vector(W::kAttnKvANorm), mla_a_, kv_lora, n, hp.rms_eps);
  k.copy_rows(r, mla_a_, k_, n, kv_lora, kv_lora, 0, latent, 0);
  k.rope(r, k_, angles, {n, 1, latent, n_rot, kv_lora, neox});
  k.rope(r, q_, angles, {n, n_head, hd, n_rot, nope, neox});
  k.store_rows(r, k_, k_rows_, l.k_cache, latent, n);
  // Each head's q_nope into latent space: [n][n_head][nope] -> [n][n_head][kv_lora].
  k.copy_rows(r, q_, mla_nope_, n * n_head, nope, hd, 0, nope, 0);
  const DeviceMatrix& k_b = l.matrix(W::kAttnKB);
  vulkan::ExpertShape per_head;
  per_head.n_expert = k_b.n_expert;
  per_head.rows = kv_lora;
  per_head.cols = nope;
  per_head.n_tokens = n;
  per_head.n_used = n_head;
  per_head.x_per_slot = true;
  k.matvec_experts(r, k_b.type, k_b.buffer, mla_nope_, head_ids_, mla_lat_, per_head);
  // Queries [n][n_head][kv_lora | rope] over the cached [c | k_r] rows.
  k.copy_rows(r, mla_lat_, mla_q_, n * n_head, kv_lora, kv_lora, 0, latent, 0);
  k.copy_rows(r, q_, mla_q_, n * n_head, n_rot, hd, nope, latent, kv_lora);
  record_attend(l, batch, mla_q_, mla_lat_, latent, kv_lora, 1, 0, true);
  // Each head's latent result through its v_b: [n][n_head][kv_lora] -> [n][n_head][hdv].
  const DeviceMatrix& v_b = l.matrix(W::kAttnVB);
  per_head.n_expert = v_b.n_expert;
  per_head.rows = hp.head_dim_v;
  per_head.cols = kv_lora;
  k.matvec_experts(r, v_b.type, v_b.buffer, mla_lat_, head_ids_, attn_, per_head);
}

}  // namespace herd::engine
