#include "engine/shard.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/ops.h"
#include "kernels/attention.h"
#include "quant/float16.h"
#include "util/error.h"

namespace herd::engine {
namespace {

using kernels::MatrixView;

// Largest head size the forward pass supports (rope angles live on the stack).
constexpr int64_t kMaxHeadDim = 512;
using kernels::PackedMatrix;

// A 1-D weight (norm, bias, rope factors) as floats, whatever its stored type.
std::vector<float> load_vector(const gguf::TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  type_traits(t.type).dequantize(t.data, out.data(), t.n_elements);
  return out;
}

MatrixView view_of(const gguf::TensorInfo& t) {
  return {t.type, t.n_rows(), t.shape[0], t.data};
}

// One expert's [rows, cols] slice of a 3-D expert tensor [cols, rows, n_expert].
MatrixView expert_view(const gguf::TensorInfo& t, int64_t e) {
  const size_t slice = row_bytes(t.type, t.shape[0]) * static_cast<size_t>(t.shape[1]);
  return {t.type, t.shape[1], t.shape[0], t.data + slice * static_cast<size_t>(e)};
}

struct Layer {
  std::vector<float> attn_norm, ffn_norm;   // [n_embd]
  std::vector<float> bq, bk, bv;            // [q_dim], [kv_dim], [kv_dim] or empty
  std::vector<float> q_norm, k_norm;        // [head_dim] or empty
  PackedMatrix wq, wk, wv, wo;              // [q_dim x n_embd], ..., [n_embd x q_dim]
  PackedMatrix ffn_gate, ffn_up, ffn_down;  // dense FFN
  PackedMatrix router;                      // [n_expert x n_embd]
  std::vector<PackedMatrix> gate_exps, up_exps, down_exps;  // per expert
};

}  // namespace

struct Shard::State {
  const ArchSpec* arch = nullptr;
  HParams hp;
  ShardSpec spec;
  ShardOptions options;
  const gguf::TensorInfo* token_embd = nullptr;
  std::vector<float> output_norm;
  PackedMatrix output;
  std::vector<float> rope_freqs;  // empty when the model has none
  std::vector<Layer> layers;      // layers [spec.layer_begin, spec.layer_end)
  KvCache kv;
  kernels::Workspace workspace;
  kernels::AttendFn attend = nullptr;

  // Scratch, grown to the largest batch seen (no allocation once warm).
  std::vector<float> x, h, q, k, v, attn, ffn_a, ffn_b, ffn_out, router_logits;
  std::vector<float> scores;  // [n_threads][n_ctx]
  std::vector<float> moe_in, moe_a, moe_b, moe_out;
  std::vector<int32_t> moe_experts;  // [n][n_expert_used]
  std::vector<float> moe_weights;    // [n][n_expert_used]

  void attention(int64_t il, const Batch& batch, ThreadPool& pool);
  void dense_ffn(const Layer& layer, int64_t n, ThreadPool& pool);
  void moe_ffn(const Layer& layer, int64_t n, ThreadPool& pool);
};

Shard::Shard(std::unique_ptr<State> state) : state_(std::move(state)) {}
Shard::Shard(Shard&&) noexcept = default;
Shard& Shard::operator=(Shard&&) noexcept = default;
Shard::~Shard() = default;

const HParams& Shard::hparams() const {
  return state_->hp;
}
const ShardSpec& Shard::spec() const {
  return state_->spec;
}
int64_t Shard::n_ctx() const {
  return state_->kv.n_ctx();
}
int64_t Shard::n_seq() const {
  return state_->kv.n_seq();
}
size_t Shard::kv_cache_bytes() const {
  return state_->kv.bytes();
}

size_t Shard::packed_weight_bytes() const {
  const State& s = *state_;
  size_t total = s.output.owned_bytes();
  for (const Layer& l : s.layers) {
    for (const PackedMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.router}) {
      total += m->owned_bytes();
    }
    for (const auto* experts : {&l.gate_exps, &l.up_exps, &l.down_exps}) {
      for (const PackedMatrix& m : *experts) total += m.owned_bytes();
    }
  }
  return total;
}

Shard Shard::load(const gguf::File& file, const ModelInfo& info, const ShardSpec& spec_in,
                  const ShardOptions& options) {
  auto s = std::make_unique<State>();
  s->arch = info.arch;
  s->hp = info.hp;
  s->spec = spec_in;
  s->options = options;
  const HParams& hp = s->hp;
  if (s->spec.layer_end < 0) s->spec.layer_end = hp.n_layer;
  const ShardSpec& spec = s->spec;
  if (spec.layer_begin < 0 || spec.layer_begin > spec.layer_end || spec.layer_end > hp.n_layer) {
    throw Error("engine", "layer range [" + std::to_string(spec.layer_begin) + ", " +
                              std::to_string(spec.layer_end) + ") is outside the model's " +
                              std::to_string(hp.n_layer) + " layers");
  }
  if (hp.head_dim > kMaxHeadDim || hp.head_dim % 2 != 0) {
    throw Error("engine", "head size " + std::to_string(hp.head_dim) +
                              " is not supported (even, at most " + std::to_string(kMaxHeadDim) +
                              ")");
  }
  const kernels::Isa isa = options.isa;
  // A repacked copy makes the mapped pages of its tensor dead weight: release them, so that
  // the process holds each weight once. (The embedding stays: rows are looked up from it.)
  auto release_if_copied = [&](const gguf::TensorInfo& t, size_t owned) {
    if (owned > 0 && !(spec.embedding && t.name == "token_embd.weight")) file.release(t);
  };
  auto pack = [&](const std::string& name) {
    const gguf::TensorInfo& t = file.tensor(name);
    PackedMatrix m = kernels::pack_matrix(view_of(t), isa);
    release_if_copied(t, m.owned_bytes());
    return m;
  };

  if (spec.embedding || (spec.output && hp.tied_output))
    s->token_embd = &file.tensor("token_embd.weight");
  if (spec.output) {
    s->output_norm = load_vector(file.tensor("output_norm.weight"));
    s->output = pack(hp.tied_output ? "token_embd.weight" : "output.weight");
  }
  if (const gguf::TensorInfo* f = file.find_tensor("rope_freqs.weight"))
    s->rope_freqs = load_vector(*f);

  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Layer l;
    l.attn_norm = load_vector(file.tensor(p + "attn_norm.weight"));
    l.ffn_norm = load_vector(file.tensor(p + "ffn_norm.weight"));
    l.wq = pack(p + "attn_q.weight");
    l.wk = pack(p + "attn_k.weight");
    l.wv = pack(p + "attn_v.weight");
    l.wo = pack(p + "attn_output.weight");
    if (s->arch->qkv_bias) {
      l.bq = load_vector(file.tensor(p + "attn_q.bias"));
      l.bk = load_vector(file.tensor(p + "attn_k.bias"));
      l.bv = load_vector(file.tensor(p + "attn_v.bias"));
    }
    if (s->arch->qk_norm) {
      l.q_norm = load_vector(file.tensor(p + "attn_q_norm.weight"));
      l.k_norm = load_vector(file.tensor(p + "attn_k_norm.weight"));
    }
    if (s->arch->moe) {
      l.router = pack(p + "ffn_gate_inp.weight");
      const gguf::TensorInfo& gate = file.tensor(p + "ffn_gate_exps.weight");
      const gguf::TensorInfo& up = file.tensor(p + "ffn_up_exps.weight");
      const gguf::TensorInfo& down = file.tensor(p + "ffn_down_exps.weight");
      for (int64_t e = 0; e < hp.n_expert; ++e) {
        l.gate_exps.push_back(kernels::pack_matrix(expert_view(gate, e), isa));
        l.up_exps.push_back(kernels::pack_matrix(expert_view(up, e), isa));
        l.down_exps.push_back(kernels::pack_matrix(expert_view(down, e), isa));
      }
      release_if_copied(gate, l.gate_exps.back().owned_bytes());
      release_if_copied(up, l.up_exps.back().owned_bytes());
      release_if_copied(down, l.down_exps.back().owned_bytes());
    } else {
      l.ffn_gate = pack(p + "ffn_gate.weight");
      l.ffn_up = pack(p + "ffn_up.weight");
      l.ffn_down = pack(p + "ffn_down.weight");
    }
    s->layers.push_back(std::move(l));
  }

  s->attend = kernels::attend_kernel(isa, hp.head_dim);
  const int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : hp.n_ctx;
  if (options.n_seq < 1) throw Error("engine", "need at least one sequence slot");
  s->kv =
      KvCache(spec.layer_end - spec.layer_begin, options.n_seq, n_ctx, hp.n_head_kv * hp.head_dim);
  return Shard(std::move(s));
}

void Shard::State::attention(int64_t il, const Batch& batch, ThreadPool& pool) {
  const int64_t n = batch.size();
  const int64_t hd = hp.head_dim;
  const int64_t q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
  const int64_t group = hp.n_head / hp.n_head_kv;
  const int64_t layer = il - spec.layer_begin;
  const float* freqs = rope_freqs.empty() ? nullptr : rope_freqs.data();
  const Layer& l = layers[static_cast<size_t>(layer)];

  // Per token: biases, q/k norm, rope, then the new keys and values go into the cache.
  pool.run(n, [&](int64_t t, int) {
    float cos[kMaxHeadDim / 2], sin[kMaxHeadDim / 2];
    rope_angles(batch.pos[t], hd, hp.rope_base, freqs, cos, sin);
    float* qt = q.data() + t * q_dim;
    float* kt = k.data() + t * kv_dim;
    float* vt = v.data() + t * kv_dim;
    if (!l.bq.empty()) {
      for (int64_t i = 0; i < q_dim; ++i) qt[i] += l.bq[i];
      for (int64_t i = 0; i < kv_dim; ++i) kt[i] += l.bk[i];
      for (int64_t i = 0; i < kv_dim; ++i) vt[i] += l.bv[i];
    }
    for (int64_t h = 0; h < hp.n_head; ++h) {
      if (!l.q_norm.empty()) rms_norm(qt + h * hd, l.q_norm.data(), hd, hp.rms_eps, qt + h * hd);
      rope_apply(qt + h * hd, hd, arch->rope_style, cos, sin);
    }
    for (int64_t h = 0; h < hp.n_head_kv; ++h) {
      if (!l.k_norm.empty()) rms_norm(kt + h * hd, l.k_norm.data(), hd, hp.rms_eps, kt + h * hd);
      rope_apply(kt + h * hd, hd, arch->rope_style, cos, sin);
    }
    uint16_t* kc = kv.k(layer, batch.seq[t], batch.pos[t]);
    uint16_t* vc = kv.v(layer, batch.seq[t], batch.pos[t]);
    for (int64_t i = 0; i < kv_dim; ++i) {
      kc[i] = fp32_to_fp16(kt[i]);
      vc[i] = fp32_to_fp16(vt[i]);
    }
  });

  // Per (token, head): causal attention over the sequence's cached positions [0, pos].
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t n_ctx = kv.n_ctx();
  pool.run(n * hp.n_head, [&](int64_t task, int thread) {
    const int64_t t = task / hp.n_head, h = task % hp.n_head;
    const int64_t g = h / group;
    const int64_t n_pos = batch.pos[t] + 1;
    attend(q.data() + t * q_dim + h * hd, kv.k(layer, batch.seq[t], 0) + g * hd,
           kv.v(layer, batch.seq[t], 0) + g * hd, kv_dim, n_pos, hd, scale,
           scores.data() + thread * n_ctx, attn.data() + t * q_dim + h * hd);
  });
}

void Shard::State::dense_ffn(const Layer& l, int64_t n, ThreadPool& pool) {
  const kernels::MatmulJob gate_up[] = {{&l.ffn_gate, ffn_a.data()}, {&l.ffn_up, ffn_b.data()}};
  kernels::matmul_batch(gate_up, h.data(), n, pool, workspace);
  const int64_t n_ff = hp.n_ff;
  pool.run(
      n, [&](int64_t t, int) { silu_mul(ffn_a.data() + t * n_ff, ffn_b.data() + t * n_ff, n_ff); });
  kernels::matmul(l.ffn_down, ffn_a.data(), n, ffn_out.data(), pool, workspace);
}

void Shard::State::moe_ffn(const Layer& l, int64_t n, ThreadPool& pool) {
  const int64_t n_embd = hp.n_embd, n_exp = hp.n_expert, n_used = hp.n_expert_used;
  const int64_t n_ff = hp.n_ff_expert;
  // Router: softmax over all experts, top-k, weights renormalized to sum to 1.
  kernels::matmul(l.router, h.data(), n, router_logits.data(), pool, workspace);
  for (int64_t t = 0; t < n; ++t) {
    float* p = router_logits.data() + t * n_exp;
    softmax(p, n_exp);
    std::vector<int32_t> order(static_cast<size_t>(n_exp));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n_used, order.end(),
                      [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t j = 0; j < n_used; ++j) sum += p[order[j]];
    for (int64_t j = 0; j < n_used; ++j) {
      moe_experts[t * n_used + j] = order[j];
      moe_weights[t * n_used + j] = p[order[j]] / sum;
    }
  }
  std::fill(ffn_out.begin(), ffn_out.begin() + n * n_embd, 0.0f);
  // Each expert runs once over the tokens routed to it.
  std::vector<int64_t> rows;
  std::vector<float> weights;
  for (int64_t e = 0; e < n_exp; ++e) {
    rows.clear();
    weights.clear();
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < n_used; ++j) {
        if (moe_experts[t * n_used + j] == e) {
          rows.push_back(t);
          weights.push_back(moe_weights[t * n_used + j]);
        }
      }
    }
    const int64_t m = static_cast<int64_t>(rows.size());
    if (m == 0) continue;
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(h.data() + rows[i] * n_embd, n_embd, moe_in.data() + i * n_embd);
    }
    const kernels::MatmulJob gate_up[] = {{&l.gate_exps[e], moe_a.data()},
                                          {&l.up_exps[e], moe_b.data()}};
    kernels::matmul_batch(gate_up, moe_in.data(), m, pool, workspace);
    for (int64_t i = 0; i < m; ++i)
      silu_mul(moe_a.data() + i * n_ff, moe_b.data() + i * n_ff, n_ff);
    kernels::matmul(l.down_exps[e], moe_a.data(), m, moe_out.data(), pool, workspace);
    for (int64_t i = 0; i < m; ++i) {
      float* out = ffn_out.data() + rows[i] * n_embd;
      const float* y = moe_out.data() + i * n_embd;
      for (int64_t c = 0; c < n_embd; ++c) out[c] += weights[i] * y[c];
    }
  }
}

void Shard::forward(const Batch& batch, const float* input, std::vector<float>& output,
                    ThreadPool& pool) {
  State& s = *state_;
  const HParams& hp = s.hp;
  const int64_t n = batch.size();
  if (n == 0) {
    output.clear();
    return;
  }
  HERD_CHECK(static_cast<int64_t>(batch.seq.size()) == n &&
             static_cast<int64_t>(batch.pos.size()) == n);
  for (int64_t t = 0; t < n; ++t) {
    if (batch.seq[t] < 0 || batch.seq[t] >= s.kv.n_seq()) {
      throw Error("engine", "sequence slot " + std::to_string(batch.seq[t]) + " does not exist (" +
                                std::to_string(s.kv.n_seq()) + " slots)");
    }
    if (batch.pos[t] < 0 || batch.pos[t] >= s.kv.n_ctx()) {
      throw Error("engine", "context full: position " + std::to_string(batch.pos[t]) +
                                " is beyond the context of " + std::to_string(s.kv.n_ctx()) +
                                " tokens");
    }
    if (s.spec.embedding && (batch.tokens[t] < 0 || batch.tokens[t] >= hp.n_vocab)) {
      throw Error("engine", "token id " + std::to_string(batch.tokens[t]) +
                                " is outside the vocabulary of " + std::to_string(hp.n_vocab));
    }
  }

  const int64_t n_embd = hp.n_embd, hd = hp.head_dim;
  const int64_t q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd;
  const int64_t n_ff = s.arch->moe ? hp.n_ff_expert : hp.n_ff;
  auto grow = [](std::vector<float>& buf, int64_t size) {
    if (static_cast<int64_t>(buf.size()) < size) buf.resize(static_cast<size_t>(size));
  };
  grow(s.x, n * n_embd);
  grow(s.h, n * n_embd);
  grow(s.q, n * q_dim);
  grow(s.k, n * kv_dim);
  grow(s.v, n * kv_dim);
  grow(s.attn, n * q_dim);
  grow(s.ffn_a, n * n_ff);
  grow(s.ffn_b, n * n_ff);
  grow(s.ffn_out, n * n_embd);
  grow(s.scores, static_cast<int64_t>(pool.size()) * s.kv.n_ctx());
  if (s.arch->moe) {
    grow(s.router_logits, n * hp.n_expert);
    grow(s.moe_in, n * n_embd);
    grow(s.moe_a, n * n_ff);
    grow(s.moe_b, n * n_ff);
    grow(s.moe_out, n * n_embd);
    s.moe_experts.resize(static_cast<size_t>(n * hp.n_expert_used));
    s.moe_weights.resize(static_cast<size_t>(n * hp.n_expert_used));
  }

  // [n][n_embd] activations entering the first layer.
  float* x = s.x.data();
  if (s.spec.embedding) {
    const TypeTraits& tt = type_traits(s.token_embd->type);
    const size_t row = row_bytes(s.token_embd->type, n_embd);
    for (int64_t t = 0; t < n; ++t) {
      tt.dequantize(s.token_embd->data + row * static_cast<size_t>(batch.tokens[t]), x + t * n_embd,
                    n_embd);
    }
  } else {
    HERD_CHECK(input != nullptr);
    std::copy_n(input, n * n_embd, x);
  }

  for (int64_t il = s.spec.layer_begin; il < s.spec.layer_end; ++il) {
    const Layer& l = s.layers[static_cast<size_t>(il - s.spec.layer_begin)];
    float* h = s.h.data();
    pool.run(n, [&](int64_t t, int) {
      rms_norm(x + t * n_embd, l.attn_norm.data(), n_embd, hp.rms_eps, h + t * n_embd);
    });
    const kernels::MatmulJob qkv[] = {
        {&l.wq, s.q.data()}, {&l.wk, s.k.data()}, {&l.wv, s.v.data()}};
    kernels::matmul_batch(qkv, h, n, pool, s.workspace);
    s.attention(il, batch, pool);
    kernels::matmul(l.wo, s.attn.data(), n, s.ffn_out.data(), pool, s.workspace);
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += s.ffn_out[i];

    pool.run(n, [&](int64_t t, int) {
      rms_norm(x + t * n_embd, l.ffn_norm.data(), n_embd, hp.rms_eps, h + t * n_embd);
    });
    if (s.arch->moe) {
      s.moe_ffn(l, n, pool);
    } else {
      s.dense_ffn(l, n, pool);
    }
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += s.ffn_out[i];
  }

  if (!s.spec.output) {
    output.assign(x, x + n * n_embd);
    return;
  }
  // Only the tokens whose logits are wanted go through the head.
  int64_t m = 0;
  float* h = s.h.data();
  for (int64_t t = 0; t < n; ++t) {
    if (!batch.want_logits[t]) continue;
    rms_norm(x + t * n_embd, s.output_norm.data(), n_embd, hp.rms_eps, h + m * n_embd);
    ++m;
  }
  output.resize(static_cast<size_t>(m * hp.n_vocab));
  kernels::matmul(s.output, h, m, output.data(), pool, s.workspace);
}

}  // namespace herd::engine
