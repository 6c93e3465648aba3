// Multi-head latent attention with the latent decompressed, for prefill. The absorbed form
// (shard_attention.cpp) costs per head (kv_lora + n_rot) + kv_lora multiply-adds for every
// (query, key) pair; with each head's keys [W_k,h c | k_r] and values W_v,h c made once
// for the visible positions, a pair costs head_dim + hdv (DeepSeek V3: 320 against 1088),
// at kv_lora (nope + hdv) per position and head for the making. A long batch of one
// sequence's tokens (a long prompt chunk) pays that back; decode, one query per position
// made, does not. All four products run on the matmul kernels (f32 weights: the cached latent
// widened, the keys, the values transposed), so each is a tiled GEMM over the pool.
#include <algorithm>
#include <cmath>

#include "engine/shard_state.h"
#include "quant/float16.h"

namespace herd::engine {
namespace {

using kernels::MatrixView;

// Positions beyond which the decompressed keys and values of a head would outgrow their
// scratch (tens of MB): such a batch takes the absorbed form.
constexpr int64_t kMaxDecompressedPositions = 8192;

template <typename T>
float* grown(std::vector<T>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// The rows of `m` as floats: [rows][cols] (its rows are whole blocks, stored back to back).
void dequantize_rows(const MatrixView& m, float* out) {
  type_traits(m.type).dequantize(m.data, out, m.rows * m.cols);
}

}  // namespace

bool Shard::State::mla_decompress_pays(const Batch& batch) const {
  const int64_t n = batch.size();
  if (options.mla_decompress_min_tokens == 0 || n < 2) return false;
  for (int64_t t = 1; t < n; ++t) {
    if (batch.seq[t] != batch.seq[0] || batch.pos[t] != batch.pos[t - 1] + 1) return false;
  }
  if (batch.pos[n - 1] + 1 > kMaxDecompressedPositions) return false;
  if (options.mla_decompress_min_tokens > 0) return n >= options.mla_decompress_min_tokens;
  // Per head and visible position: n (latent + kv_lora) multiply-adds absorbed against
  // n (head_dim + hdv) + kv_lora (nope + hdv) decompressed. The absorbed ones run on the
  // attention kernel (attend_lanes: 118 GFLOP/s a core on DeepSeek's 576/512 rows), the
  // decompressed ones on the f32 GEMM (about 70): 1.7 times the cost each. For DeepSeek V3's
  // sizes that is batches of more than about 410 tokens (docs/performance.md).
  const int64_t latent = hp.kv_lora_rank + hp.n_rot, nope = hp.head_dim - hp.n_rot;
  const int64_t absorbed = n * (latent + hp.kv_lora_rank);
  const int64_t decompressed =
      n * (hp.head_dim + hp.head_dim_v) + hp.kv_lora_rank * (nope + hp.head_dim_v);
  return 17 * decompressed < 10 * absorbed;
}

bool Shard::State::mla_decompressed(const Layer& l, int64_t layer, const Batch& batch,
                                    ThreadPool& pool) {
  if (!mla_decompress_pays(batch) || l.w_k.size() != static_cast<size_t>(n_head)) return false;
  const int64_t n = batch.size(), seq = batch.seq[0], first = batch.pos[0];
  const int64_t n_pos = batch.pos[n - 1] + 1;  // visible positions [0, n_pos)
  const int64_t hd = hp.head_dim, hdv = hp.head_dim_v, n_rot = hp.n_rot, nope = hd - n_rot;
  const int64_t kv_lora = hp.kv_lora_rank;
  const int64_t q_dim = n_head * hd;

  // The cached rows [c | k_r] of the visible positions, widened once for every head.
  float* c = grown(dmla_c, n_pos * kv_lora);    // [n_pos][kv_lora]
  float* kr = grown(dmla_rope, n_pos * n_rot);  // [n_pos][n_rot]
  pool.run(n_pos, [&](int64_t p, int) {
    const uint16_t* row = kv.k(layer, seq, p);
    for (int64_t i = 0; i < kv_lora; ++i) c[p * kv_lora + i] = fp16_to_fp32(row[i]);
    for (int64_t i = 0; i < n_rot; ++i) kr[p * n_rot + i] = fp16_to_fp32(row[kv_lora + i]);
  });
  const kernels::Isa isa = options.isa;
  const kernels::PackedMatrix latent_rows =
      kernels::pack_matrix({TensorType::F32, n_pos, kv_lora, reinterpret_cast<uint8_t*>(c)}, isa);
  float* k_nope = grown(dmla_knope, n_pos * nope);  // [n_pos][nope]
  float* keys = grown(dmla_k, n_pos * hd);          // [n_pos][nope | n_rot]
  float* values_t = grown(dmla_vt, hdv * n_pos);    // [hdv][n_pos]
  float* qh = grown(dmla_q, n * hd);                // [n][hd]
  float* scores = grown(dmla_s, n * n_pos);         // [n][n_pos]
  float* oh = grown(dmla_o, n * hdv);               // [n][hdv]
  float* wk = grown(dmla_wk, 2 * nope * kv_lora);   // [nope][kv_lora], then staging
  float* wv = grown(dmla_wv, hdv * kv_lora);        // [hdv][kv_lora]

  for (int64_t hh = 0; hh < n_head; ++hh) {
    // W_k,h as [nope][kv_lora] rows and W_v,h as [hdv][kv_lora].
    const MatrixView& k_view = l.w_k[static_cast<size_t>(hh)];
    if (l.w_k_transposed) {
      float* stored = wk + nope * kv_lora;  // [kv_lora][nope]
      dequantize_rows(k_view, stored);
      for (int64_t r = 0; r < kv_lora; ++r) {
        for (int64_t j = 0; j < nope; ++j) wk[j * kv_lora + r] = stored[r * nope + j];
      }
    } else {
      dequantize_rows(k_view, wk);
    }
    dequantize_rows(l.w_v[static_cast<size_t>(hh)], wv);
    const kernels::PackedMatrix wk_rows =
        kernels::pack_matrix({TensorType::F32, nope, kv_lora, reinterpret_cast<uint8_t*>(wk)}, isa);

    // Keys: [n_pos][nope] = c W_k,h^T, then beside them the shared rope keys.
    kernels::matmul(wk_rows, c, n_pos, k_nope, pool, workspace);
    pool.run(n_pos, [&](int64_t p, int) {
      std::copy_n(k_nope + p * nope, nope, keys + p * hd);
      std::copy_n(kr + p * n_rot, n_rot, keys + p * hd + nope);
    });
    // Values transposed: [hdv][n_pos] = W_v,h c^T (the latent rows are the weights).
    kernels::matmul(latent_rows, wv, hdv, values_t, pool, workspace);

    // Scores [n][n_pos] = q_h . keys, softmax over the causal prefix of each query.
    for (int64_t t = 0; t < n; ++t) std::copy_n(q.data() + t * q_dim + hh * hd, hd, qh + t * hd);
    const kernels::PackedMatrix key_rows =
        kernels::pack_matrix({TensorType::F32, n_pos, hd, reinterpret_cast<uint8_t*>(keys)}, isa);
    kernels::matmul(key_rows, qh, n, scores, pool, workspace);
    pool.run(n, [&](int64_t t, int) {
      float* s = scores + t * n_pos;
      const int64_t visible = first + t + 1;
      float max = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        s[j] *= l.attn_scale;
        max = std::max(max, s[j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < visible; ++j) {
        s[j] = std::exp(s[j] - max);
        sum += s[j];
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < visible; ++j) s[j] *= inv;
      std::fill(s + visible, s + n_pos, 0.0f);
    });
    // Output [n][hdv] = the weights times the values (their transpose the weights).
    const kernels::PackedMatrix value_rows = kernels::pack_matrix(
        {TensorType::F32, hdv, n_pos, reinterpret_cast<uint8_t*>(values_t)}, isa);
    kernels::matmul(value_rows, scores, n, oh, pool, workspace);
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(oh + t * hdv, hdv, attn.data() + t * n_head * hdv + hh * hdv);
  }
  return true;
}

}  // namespace herd::engine
