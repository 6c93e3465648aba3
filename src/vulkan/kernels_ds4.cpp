// DeepSeek V4's operations on the device (kernels.h): hyper-connections, the compressors,
// the lightning indexer, compressed attention and hash routing. Their shaders are
// shaders/hc_pre.comp ... hash_route.comp; engine/vulkan_ds4.cpp records them.
#include <limits>
#include <string>

#include "util/error.h"
#include "vulkan/kernel_args.h"
#include "vulkan/kernels.h"

namespace herd::vulkan {

using detail::ceil_div;
using detail::u32;

void Kernels::hc_pre(Recorder& r, Binding x, Binding mixes, Binding scale, Binding base,
                     Binding coeffs, Binding out, const HyperShape& s) {
  HERD_CHECK_MSG(s.n_hc >= 1 && s.n_hc <= 8 && s.sinkhorn_iters >= 1,
                 "streams " + std::to_string(s.n_hc));
  struct Push {
    uint32_t n_tokens, n_hc, n_embd, sinkhorn_iters;
    float eps;
    uint32_t head;
  } push{u32(s.n_tokens, "tokens"),
         u32(s.n_hc, "streams"),
         u32(s.n_embd, "n_embd"),
         u32(s.sinkhorn_iters, "Sinkhorn iterations"),
         s.eps,
         s.head ? 1u : 0u};
  u32(s.n_tokens * s.n_hc * s.n_embd, "elements");
  const Pipeline& p =
      pipeline("hc_pre", 6, sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, mixes, scale, base, coeffs, out}, push, uint64_t(s.n_tokens));
}

void Kernels::hc_post(Recorder& r, Binding f, Binding coeffs, Binding x, const HyperShape& s) {
  HERD_CHECK_MSG(s.n_hc >= 1 && s.n_hc <= 8, "streams " + std::to_string(s.n_hc));
  struct Push {
    uint32_t n_tokens, n_hc, n_embd;
  } push{u32(s.n_tokens, "tokens"), u32(s.n_hc, "streams"), u32(s.n_embd, "n_embd")};
  const uint64_t n = u32(s.n_tokens * s.n_embd, "elements");
  u32(s.n_tokens * s.n_hc * s.n_embd, "elements");
  const Pipeline& p =
      pipeline("hc_post", 3, sizeof(Push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {f, coeffs, x}, push, ceil_div(n, elementwise_size_));
}

void Kernels::hadamard(Recorder& r, Binding x, int64_t n, int64_t n_rows) {
  HERD_CHECK_MSG(n > 0 && n <= 1024 && (n & (n - 1)) == 0, "n " + std::to_string(n));
  struct Push {
    uint32_t n_rows, n;
  } push{u32(n_rows, "rows"), u32(n, "n")};
  u32(n * n_rows, "elements");
  const Pipeline& p =
      pipeline("hadamard", 1, sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {x}, push, uint64_t(n_rows));
}

void Kernels::compressor_rows(Recorder& r, Binding kv, Binding score, Binding ape, Binding tokens,
                              Binding kv_rows, Binding score_rows, const CompressShape& s,
                              int64_t n_tokens) {
  HERD_CHECK(s.ratio > 0);
  struct Push {
    uint32_t n_tokens, width, ratio, n_ctx;
  } push{u32(n_tokens, "tokens"), u32(s.width(), "width"), u32(s.ratio, "ratio"),
         u32(s.n_ctx, "positions")};
  u32(s.n_ctx * s.width(), "row elements");
  const uint64_t n = u32(n_tokens * s.width(), "elements");
  const Pipeline& p = pipeline("compressor_rows", 6, sizeof(Push),
                               {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {kv, score, ape, tokens, kv_rows, score_rows}, push,
             ceil_div(n, elementwise_size_));
}

void Kernels::compress(Recorder& r, Binding kv_rows, Binding score_rows, Binding blocks,
                       Binding norm, Binding angles, Binding entries, const CompressShape& s,
                       int64_t n_blocks) {
  const int64_t d = s.head_dim;
  HERD_CHECK_MSG(s.ratio > 0 && d % 2 == 0 && d <= 1024 && s.n_rot % 2 == 0 && s.n_rot <= d &&
                     (!s.hadamard || (d & (d - 1)) == 0),
                 "entry size " + std::to_string(d) + ", n_rot " + std::to_string(s.n_rot));
  struct Push {
    uint32_t n_blocks, ratio, head_dim, overlap, n_ctx, n_entries, n_rot, hadamard;
    float eps;
  } push{u32(n_blocks, "blocks"), u32(s.ratio, "ratio"),     u32(d, "entry size"),
         s.overlap ? 1u : 0u,     u32(s.n_ctx, "positions"), u32(s.n_entries, "entries"),
         u32(s.n_rot, "n_rot"),   s.hadamard ? 1u : 0u,      s.eps};
  u32(s.n_entries * d, "entry elements");
  const Pipeline& p =
      pipeline("compress", 6, sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {kv_rows, score_rows, blocks, norm, angles, entries}, push, uint64_t(n_blocks));
}

void Kernels::indexer_top_k(Recorder& r, Binding q, Binding w, Binding keys, Binding tokens,
                            Binding scores, Binding chosen, const IndexerShape& s) {
  HERD_CHECK_MSG(s.dim % 2 == 0 && s.ratio > 0 && s.top_k > 0,
                 "indexer key size " + std::to_string(s.dim));
  struct Push {
    uint32_t n_tokens, n_head, dim, n_entries, ratio, top_k;
    float w_scale;
  } push{u32(s.n_tokens, "tokens"),
         u32(s.n_head, "heads"),
         u32(s.dim, "key size"),
         u32(s.n_entries, "entries"),
         u32(s.ratio, "ratio"),
         u32(s.top_k, "top_k"),
         s.w_scale};
  u32(s.n_tokens * s.n_entries, "scores");
  u32(s.n_tokens * s.n_head * s.dim, "query elements");
  const Pipeline& p =
      pipeline("indexer", 6, sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {q, w, keys, tokens, scores, chosen}, push, uint64_t(s.n_tokens));
}

void Kernels::attend_compressed(Recorder& r, Binding q, Binding raw, Binding entries,
                                Binding chosen, Binding sinks, Binding tokens, Binding scores,
                                Binding out, const CompressedAttentionShape& s) {
  HERD_CHECK_MSG(s.dim % 2 == 0 && s.dim <= 1024 && s.window > 0,
                 "head size " + std::to_string(s.dim) + ", window " + std::to_string(s.window));
  struct Push {
    uint32_t n_tokens, n_head, dim, n_ctx, window, ratio, indexed, top_k, n_entries, key_rows;
    float scale;
  } push{u32(s.n_tokens, "tokens"),
         u32(s.n_head, "heads"),
         u32(s.dim, "head size"),
         u32(s.n_ctx, "positions"),
         u32(s.window, "window"),
         u32(s.ratio, "ratio"),
         s.indexed ? 1u : 0u,
         u32(s.top_k, "top_k"),
         u32(s.n_entries, "entries"),
         u32(s.key_rows(), "keys"),
         s.scale};
  u32(s.n_tokens * s.n_head * s.key_rows(), "scores");
  u32(s.n_tokens * s.n_head * s.dim, "query elements");
  const Pipeline& p =
      pipeline(subgroups_ ? "attend_compressed_subgroup" : "attend_compressed_shared", 8,
               sizeof(Push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {q, raw, entries, chosen, sinks, tokens, scores, out}, push,
             uint64_t(s.n_tokens * s.n_head));
}

void Kernels::hash_route(Recorder& r, Binding logits, Binding table, Binding tokens,
                         Binding experts, Binding weights, const RouterShape& s) {
  HERD_CHECK_MSG(s.n_used > 0 && s.n_used <= 64 && s.n_used <= s.n_expert,
                 "experts used " + std::to_string(s.n_used));
  struct Push {
    uint32_t n_tokens, n_expert, n_used, gating, norm_weights;
    float weights_scale;
  } push{u32(s.n_tokens, "tokens"),       u32(s.n_expert, "experts"), u32(s.n_used, "experts used"),
         static_cast<uint32_t>(s.gating), s.norm_weights ? 1u : 0u,   s.weights_scale};
  const Pipeline& p =
      pipeline("hash_route", 5, sizeof(Push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {logits, table, tokens, experts, weights}, push,
             ceil_div(uint64_t(s.n_tokens), elementwise_size_));
}

}  // namespace herd::vulkan
