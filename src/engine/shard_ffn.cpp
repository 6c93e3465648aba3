// The FFN half of a layer: a dense gated FFN, or a mixture of experts (with its router,
// per-expert biases and shared experts).
#include <algorithm>
#include <cmath>

#include "engine/shard_state.h"
#include "util/error.h"

namespace herd::engine {

void Shard::State::gated_ffn(const PackedMatrix& gate, const PackedMatrix& up,
                             const PackedMatrix& down, int64_t rows, const float* in, int64_t n,
                             ThreadPool& pool, float* a, float* b, float* out,
                             const float* gate_bias, const float* up_bias, float limit) {
  const kernels::MatmulJob gate_up[] = {{&gate, a}, {&up, b}};
  kernels::matmul_batch(gate_up, in, n, pool, workspace);
  pool.run(n, [&](int64_t t, int) {
    float* at = a + t * rows;
    float* bt = b + t * rows;
    if (gate_bias != nullptr) {
      for (int64_t i = 0; i < rows; ++i) at[i] += gate_bias[i];
    }
    if (up_bias != nullptr) {
      for (int64_t i = 0; i < rows; ++i) bt[i] += up_bias[i];
    }
    switch (arch->activation) {
      case Activation::kSilu:
        if (limit > 0) {
          silu_clamp_mul(at, bt, rows, limit);
        } else {
          silu_mul(at, bt, rows);
        }
        break;
      case Activation::kGeluTanh:
        gelu_tanh_mul(at, bt, rows);
        break;
      case Activation::kSwigluOai:
        swiglu_oai_mul(at, bt, rows);
        break;
    }
  });
  kernels::matmul(down, a, n, out, pool, workspace);
}

void Shard::State::ffn(const Layer& l, int64_t n, ThreadPool& pool, const Batch& batch) {
  if (l.options.moe) {
    moe_ffn(l, n, pool, batch, h.data(), h.data(), ffn_out.data());
  } else if (l.ffn_runs) {
    gated_ffn(l.ffn_gate, l.ffn_up, l.ffn_down, l.n_ff, h.data(), n, pool, ffn_a.data(),
              ffn_b.data(), ffn_out.data(), nullptr, nullptr, hp.swiglu_limit_shared);
  } else {
    std::fill_n(ffn_out.data(), n * hp.n_embd, 0.0f);
  }
}

void Shard::State::moe_ffn(const Layer& l, int64_t n, ThreadPool& pool, const Batch& batch,
                           const float* router_in, const float* in, float* out) {
  const int64_t n_embd = hp.n_embd, n_exp = hp.n_expert, n_used = hp.n_expert_used;
  kernels::matmul(l.router, router_in, n, router_logits.data(), pool, workspace);
  for (int64_t t = 0; t < n; ++t) {
    float* logits = router_logits.data() + t * n_exp;
    if (!l.router_bias.empty()) {
      for (int64_t e = 0; e < n_exp; ++e) logits[e] += l.router_bias[static_cast<size_t>(e)];
    }
    // A hash-routed layer's experts are its table's row of the token (ids checked at load).
    const int32_t* fixed =
        l.hash_experts.empty()
            ? nullptr
            : l.hash_experts.data() + static_cast<int64_t>(batch.tokens[t]) * n_used;
    router->route(logits, l.selection_bias.empty() ? nullptr : l.selection_bias.data(),
                  moe_experts.data() + t * n_used, moe_weights.data() + t * n_used, fixed);
  }
  std::fill_n(out, n * n_embd, 0.0f);  // [n][n_embd]
  // Each held expert runs once over the tokens routed to it (a tensor-parallel rank holds
  // some experts, or some rows of each: the all-reduce adds the other ranks' share).
  for (size_t i_exp = 0; i_exp < l.gate_exps.size(); ++i_exp) {
    const int64_t e = experts[i_exp];
    int64_t m = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < n_used; ++j) {
        if (moe_experts[static_cast<size_t>(t * n_used + j)] == e) {
          moe_rows[static_cast<size_t>(m)] = t;
          moe_row_weights[static_cast<size_t>(m)] =
              moe_weights[static_cast<size_t>(t * n_used + j)];
          ++m;
        }
      }
    }
    if (m == 0) continue;
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(in + moe_rows[static_cast<size_t>(i)] * n_embd, n_embd,
                  moe_in.data() + i * n_embd);
    }
    const float* gate_b = l.gate_exps_b.empty() ? nullptr : l.gate_exps_b.data() + i_exp * n_ff;
    const float* up_b = l.up_exps_b.empty() ? nullptr : l.up_exps_b.data() + i_exp * n_ff;
    const float* down_b = l.down_exps_b.empty() ? nullptr : l.down_exps_b.data() + i_exp * n_embd;
    gated_ffn(l.gate_exps[i_exp], l.up_exps[i_exp], l.down_exps[i_exp], n_ff, moe_in.data(), m,
              pool, moe_a.data(), moe_b.data(), moe_out.data(), gate_b, up_b, hp.swiglu_limit);
    // Gemma 4 scales each expert's output by its own factor.
    const float scale =
        l.down_exps_scale.empty() ? 1.0f : l.down_exps_scale[static_cast<size_t>(e)];
    for (int64_t i = 0; i < m; ++i) {
      float* o = out + moe_rows[static_cast<size_t>(i)] * n_embd;
      const float* y = moe_out.data() + i * n_embd;
      const float w = moe_row_weights[static_cast<size_t>(i)] * scale;
      if (down_b != nullptr) {
        for (int64_t c = 0; c < n_embd; ++c) o[c] += w * (y[c] + down_b[c]);
      } else {
        for (int64_t c = 0; c < n_embd; ++c) o[c] += w * y[c];
      }
    }
  }
  if (l.ffn_runs && !arch->moe_beside_dense) {  // shared experts: every token, weight 1
    gated_ffn(l.ffn_gate, l.ffn_up, l.ffn_down, l.n_ff, in, n, pool, ffn_a.data(), ffn_b.data(),
              moe_acc.data(), nullptr, nullptr, hp.swiglu_limit_shared);
    if (!l.shexp_gate.empty()) {
      // Gated shared expert: scaled per token by sigmoid(ffn_gate_inp_shexp . in).
      pool.run(n, [&](int64_t t, int) {
        const float* it = in + t * n_embd;
        float dot = 0;
        for (int64_t c = 0; c < n_embd; ++c) dot += l.shexp_gate[static_cast<size_t>(c)] * it[c];
        const float gate = 1.0f / (1.0f + std::exp(-dot));
        float* y = moe_acc.data() + t * n_embd;
        for (int64_t c = 0; c < n_embd; ++c) y[c] *= gate;
      });
    }
    for (int64_t i = 0; i < n * n_embd; ++i) out[i] += moe_acc[static_cast<size_t>(i)];
  }
}

void Shard::State::moe_beside_dense_ffn(const Layer& l, const float* x, int64_t n, ThreadPool& pool,
                                        const Batch& batch) {
  const int64_t n_embd = hp.n_embd;
  // The layer's MLP over h = RMSNorm(x) * ffn_norm: m [n][n_embd] in moe_acc.
  float* m = moe_acc.data();
  if (l.ffn_runs) {
    gated_ffn(l.ffn_gate, l.ffn_up, l.ffn_down, l.n_ff, h.data(), n, pool, ffn_a.data(),
              ffn_b.data(), m, nullptr, nullptr, hp.swiglu_limit_shared);
  } else {
    std::fill_n(m, n * n_embd, 0.0f);
  }
  // The router reads RMSNorm(x) * ffn_gate_inp.scale / sqrt(n_embd), the experts
  // RMSNorm(x) * pre_ffw_norm_2 (in h, free again).
  pool.run(n, [&](int64_t t, int) {
    rms_norm(x + t * n_embd, l.router_scale.data(), n_embd, hp.rms_eps,
             router_in.data() + t * n_embd);
    rms_norm(x + t * n_embd, l.pre_ffn_norm_2.data(), n_embd, hp.rms_eps, h.data() + t * n_embd);
  });
  float* e = ffn_out.data();
  moe_ffn(l, n, pool, batch, router_in.data(), h.data(), e);
  // f = RMSNorm(m) * post_ffw_norm_1 + RMSNorm(e) * post_ffw_norm_2, in ffn_out.
  pool.run(n, [&](int64_t t, int) {
    float* mt = m + t * n_embd;
    float* et = e + t * n_embd;
    rms_norm(mt, l.post_ffn_norm_1.data(), n_embd, hp.rms_eps, mt);
    rms_norm(et, l.post_ffn_norm_2.data(), n_embd, hp.rms_eps, et);
    for (int64_t i = 0; i < n_embd; ++i) et[i] += mt[i];
  });
}

}  // namespace herd::engine
