// Gemma 4's per-layer inputs (E2B / E4B): besides the residual stream, each layer gets a
// small input of its own, P = n_embd_per_layer values per token, made from the token id and
// its embedding; after the FFN the layer gates it with the stream and adds the projection
// back. Every stage computes its own layers' inputs (the token ids travel with the batch),
// so nothing extra crosses between stages.
#include <cmath>

#include "engine/shard_state.h"
#include "quant/types.h"

namespace herd::engine {

void Shard::State::per_layer_inputs(const Batch& batch, const float* embedded, ThreadPool& pool) {
  const int64_t n = batch.size(), p = hp.n_embd_per_layer;
  const int64_t layers = spec.layer_end - spec.layer_begin, width = layers * p;
  float* out = per_layer.data();  // [n][layers][P]
  // The projection of the scaled embedding, this shard's layers' rows: [n][layers P].
  kernels::matmul(per_layer_model_proj, embedded, n, out, pool, workspace);
  const TypeTraits& tt = type_traits(per_layer_embd->type);
  const size_t row = row_bytes(per_layer_embd->type, per_layer_embd->shape[0]);
  const size_t layer_bytes = row_bytes(per_layer_embd->type, p);  // P is whole blocks (load)
  const float embd_scale = std::sqrt(static_cast<float>(p));
  const float half = 1.0f / std::sqrt(2.0f);
  // The HF model scales the projection by n_embd^-1/2 before its RMSNorm: the same as an
  // epsilon n_embd times larger.
  const float eps = hp.rms_eps * static_cast<float>(hp.n_embd);
  pool.run(n, [&](int64_t t, int) {
    const uint8_t* token_row =
        per_layer_embd->data + row * static_cast<size_t>(batch.tokens[static_cast<size_t>(t)]);
    float* e = per_layer_a.data() + t * p;  // [P] this token's embedding for one layer
    for (int64_t j = 0; j < layers; ++j) {
      float* pj = out + t * width + j * p;
      rms_norm(pj, per_layer_proj_norm.data(), p, eps, pj);
      tt.dequantize(token_row + layer_bytes * static_cast<size_t>(spec.layer_begin + j), e, p);
      for (int64_t i = 0; i < p; ++i) pj[i] = (pj[i] + e[i] * embd_scale) * half;
    }
  });
}

void Shard::State::add_per_layer_input(const Layer& l, int64_t layer, float* x, int64_t n,
                                       ThreadPool& pool) {
  const int64_t p = hp.n_embd_per_layer, n_embd = hp.n_embd;
  const int64_t width = (spec.layer_end - spec.layer_begin) * p;
  float* a = per_layer_a.data();  // [n][P]
  kernels::matmul(l.per_layer_gate, x, n, a, pool, workspace);
  pool.run(n, [&](int64_t t, int) {
    gelu_tanh_mul(a + t * p, per_layer.data() + t * width + layer * p, p);
  });
  float* proj = ffn_out.data();  // [n][n_embd]
  kernels::matmul(l.per_layer_proj, a, n, proj, pool, workspace);
  pool.run(n, [&](int64_t t, int) {
    float* pt = proj + t * n_embd;
    rms_norm(pt, l.per_layer_post_norm.data(), n_embd, hp.rms_eps, pt);
    float* xt = x + t * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) xt[i] += pt[i];
  });
}

}  // namespace herd::engine
