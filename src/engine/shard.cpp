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

// A half-open range of rows or columns.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

std::string range_text(Range r) {
  return "[" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
}

// Elements [r.begin, r.end) of a vector (a bias of some heads).
std::vector<float> slice_of(const std::vector<float>& v, Range r) {
  return {v.begin() + r.begin, v.begin() + r.end};
}

struct Layer {
  std::vector<float> attn_norm, ffn_norm;   // [n_embd]
  std::vector<float> bq, bk, bv;            // [q_dim], [kv_dim], [kv_dim] or empty
  std::vector<float> q_norm, k_norm;        // [head_dim] or empty
  PackedMatrix wq, wk, wv, wo;              // [q_dim x n_embd], ..., [n_embd x q_dim]
  PackedMatrix ffn_gate, ffn_up, ffn_down;  // dense FFN
  PackedMatrix router;                      // [n_expert x n_embd], whole on every rank
  std::vector<PackedMatrix> gate_exps, up_exps, down_exps;  // per held expert
};

}  // namespace

struct Shard::State {
  const ArchSpec* arch = nullptr;
  HParams hp;
  ShardSpec spec;
  ShardOptions options;
  // The slice's sizes: the model's own for a whole shard. Weights, biases and the KV cache
  // hold only these; the forward pass sizes everything by them.
  int64_t n_head = 0, n_head_kv = 0;  // query heads, KV heads (spec.slice's ranges)
  int64_t n_ff = 0;                   // FFN rows (of the dense FFN or of each held expert)
  int64_t n_vocab = 0;                // output-head rows
  std::vector<int64_t> experts;       // MoE: ids of the held experts, parallel to gate_exps
  bool sliced = false;                // holds less than the whole model
  bool partial_sums = false;          // its layers' projections are partial: needs an all-reduce

  const gguf::TensorInfo* token_embd = nullptr;
  std::vector<float> output_norm;
  PackedMatrix output;  // [n_vocab x n_embd]: rows [vocab_begin, vocab_end)
  // Column slices copied out of the file, kept only when the packed matrix is a view of
  // them (the kernels of some types read the GGUF layout directly).
  std::vector<std::vector<uint8_t>> column_copies;
  std::vector<float> rope_freqs;  // empty when the model has none
  std::vector<Layer> layers;      // layers [spec.layer_begin, spec.layer_end)
  KvCache kv;
  kernels::Workspace workspace;
  kernels::AttendFn attend = nullptr;
  kernels::SiluMulFn silu_mul = nullptr;

  // Scratch, grown to the largest batch seen (no allocation once warm).
  std::vector<float> x, h, q, k, v, attn, ffn_a, ffn_b, ffn_out, router_logits;
  std::vector<float> scores;  // [n_threads][heads per KV head][n_ctx]
  std::vector<float> moe_in, moe_a, moe_b, moe_out;
  std::vector<int32_t> moe_experts;  // [n][n_expert_used]
  std::vector<float> moe_weights;    // [n][n_expert_used]

  // Resolves spec.slice's -1 ends, checks it against the model and sets the slice sizes.
  void resolve_slice();
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
bool Shard::is_sliced() const {
  return state_->sliced;
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
  for (const auto& copy : s.column_copies) total += copy.size();
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
  s->resolve_slice();
  const TensorSlice& slice = spec.slice;
  const int64_t hd = hp.head_dim;
  const Range q_rows{slice.head_begin * hd, slice.head_end * hd};  // of attn_q, attn_output cols
  const Range kv_rows{slice.kv_head_begin * hd, slice.kv_head_end * hd};
  const Range ff{slice.ff_begin, slice.ff_end};
  const Range vocab{slice.vocab_begin, slice.vocab_end};

  const kernels::Isa isa = options.isa;
  // A repacked copy makes the mapped pages of its tensor dead weight: release them, so that
  // the process holds each weight once. (The embedding stays: rows are looked up from it.)
  // A rank's slice that the kernels read in place keeps only the pages of its own rows.
  auto release_if_copied = [&](const gguf::TensorInfo& t, bool copied) {
    if (copied && !(spec.embedding && t.name == "token_embd.weight")) file.release(t);
  };
  // Where the model's rows (dim 1) or columns (dim 0) `want` of weight `name` are in the
  // file: the same, unless the file holds a rank's cut (info.file_slice), whose tensors
  // start at the cut's first row or column.
  auto in_file = [&](const std::string& name, int dim, Range want) {
    const TensorSpec* ts = info.file_slice ? find_tensor_spec(info, name) : nullptr;
    if (ts == nullptr || want.size() == 0) return want;
    const WeightCut held = weight_cut(*ts, *info.file_slice, hp);
    if (held.dim != dim) return want;
    if (want.begin < held.begin || want.end > held.end) {
      throw Error("engine", "tensor '" + name + "': the file holds " +
                                (dim == 0 ? "columns " : "rows ") +
                                range_text({held.begin, held.end}) + " of it, the shard needs " +
                                range_text(want));
    }
    return Range{want.begin - held.begin, want.end - held.begin};
  };
  // Expert e's index in the file's expert tensor `name` (a cut file holds some experts).
  auto expert_in_file = [&](const std::string& name, int64_t e) -> int64_t {
    if (!info.file_slice || !info.file_slice->experts) return e;
    const std::vector<int64_t>& held = *info.file_slice->experts;
    const auto it = std::lower_bound(held.begin(), held.end(), e);
    if (it == held.end() || *it != e) {
      throw Error("engine",
                  "tensor '" + name + "': the file does not hold expert " + std::to_string(e));
    }
    return it - held.begin();
  };
  // Packs the model's rows `rows` and columns `cols` of m, the file's tensor `name`; sets
  // `copied` when the result no longer reads m's bytes. An empty slice is an empty matrix
  // (not used).
  auto pack_slice = [&](const MatrixView& m, const std::string& name, Range model_rows,
                        Range model_cols, bool& copied) {
    if (model_rows.size() == 0 || model_cols.size() == 0) return PackedMatrix();
    const Range rows = in_file(name, 1, model_rows), cols = in_file(name, 0, model_cols);
    const size_t row_size = row_bytes(m.type, m.cols);
    MatrixView view{m.type, rows.size(), m.cols,
                    m.data + row_size * static_cast<size_t>(rows.begin)};
    if (cols.size() == m.cols) {
      PackedMatrix packed = kernels::pack_matrix(view, isa);
      copied = copied || packed.owned_bytes() > 0;
      return packed;
    }
    // A column slice: the partial dot products of a row-split input. Each row's columns
    // [cols.begin, cols.end) must be whole quant blocks to be cut out of it (cut_shape
    // refuses them otherwise, naming the tensor).
    const std::vector<int64_t> shape = {m.cols, rows.size()};
    const WeightCut cut{0, cols.begin, cols.end, std::nullopt};
    cut_shape(name, m.type, shape, cut);
    std::vector<uint8_t> copy;  // [rows][row_bytes(cols)]
    copy.reserve(row_bytes(m.type, cols.size()) * static_cast<size_t>(rows.size()));
    for_each_cut_run(m.type, shape, cut, [&](uint64_t offset, uint64_t size) {
      copy.insert(copy.end(), view.data + offset, view.data + offset + size);
    });
    PackedMatrix packed =
        kernels::pack_matrix({m.type, rows.size(), cols.size(), copy.data()}, isa);
    if (packed.owned_bytes() == 0) s->column_copies.push_back(std::move(copy));
    copied = true;
    return packed;
  };
  auto pack = [&](const std::string& name, Range rows, Range cols) {
    // A file cut for an empty slice does not have the tensor at all.
    if (rows.size() == 0 || cols.size() == 0) return PackedMatrix();
    const gguf::TensorInfo& t = file.tensor(name);
    bool copied = false;
    PackedMatrix m = pack_slice(view_of(t), name, rows, cols, copied);
    release_if_copied(t, copied);
    return m;
  };
  const Range all_embd{0, hp.n_embd};

  if (spec.embedding || (spec.output && hp.tied_output))
    s->token_embd = &file.tensor("token_embd.weight");
  if (spec.output) {
    s->output_norm = load_vector(file.tensor("output_norm.weight"));
    s->output = pack(hp.tied_output ? "token_embd.weight" : "output.weight", vocab, all_embd);
  }
  if (const gguf::TensorInfo* f = file.find_tensor("rope_freqs.weight"))
    s->rope_freqs = load_vector(*f);

  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Layer l;
    l.attn_norm = load_vector(file.tensor(p + "attn_norm.weight"));
    l.ffn_norm = load_vector(file.tensor(p + "ffn_norm.weight"));
    l.wq = pack(p + "attn_q.weight", q_rows, all_embd);
    l.wk = pack(p + "attn_k.weight", kv_rows, all_embd);
    l.wv = pack(p + "attn_v.weight", kv_rows, all_embd);
    l.wo = pack(p + "attn_output.weight", all_embd, q_rows);
    if (s->arch->qkv_bias && q_rows.size() > 0) {  // (no heads: no attention, no biases)
      auto bias = [&](const std::string& name, Range r) {
        return slice_of(load_vector(file.tensor(name)), in_file(name, 0, r));
      };
      l.bq = bias(p + "attn_q.bias", q_rows);
      l.bk = bias(p + "attn_k.bias", kv_rows);
      l.bv = bias(p + "attn_v.bias", kv_rows);
    }
    if (s->arch->qk_norm) {  // per head, the same for every head: whole on every rank
      l.q_norm = load_vector(file.tensor(p + "attn_q_norm.weight"));
      l.k_norm = load_vector(file.tensor(p + "attn_k_norm.weight"));
    }
    if (s->arch->moe) {
      l.router = pack(p + "ffn_gate_inp.weight", {0, hp.n_expert}, all_embd);
      const std::string gate_name = p + "ffn_gate_exps.weight";
      const std::string up_name = p + "ffn_up_exps.weight";
      const std::string down_name = p + "ffn_down_exps.weight";
      if (ff.size() > 0 && !s->experts.empty()) {  // else the rank holds nothing of any expert
        const gguf::TensorInfo& gate = file.tensor(gate_name);
        const gguf::TensorInfo& up = file.tensor(up_name);
        const gguf::TensorInfo& down = file.tensor(down_name);
        bool gate_copied = false, up_copied = false, down_copied = false;
        for (int64_t e : s->experts) {
          l.gate_exps.push_back(pack_slice(expert_view(gate, expert_in_file(gate_name, e)),
                                           gate_name, ff, all_embd, gate_copied));
          l.up_exps.push_back(pack_slice(expert_view(up, expert_in_file(up_name, e)), up_name, ff,
                                         all_embd, up_copied));
          l.down_exps.push_back(pack_slice(expert_view(down, expert_in_file(down_name, e)),
                                           down_name, all_embd, ff, down_copied));
        }
        release_if_copied(gate, gate_copied);
        release_if_copied(up, up_copied);
        release_if_copied(down, down_copied);
      }
    } else {
      l.ffn_gate = pack(p + "ffn_gate.weight", ff, all_embd);
      l.ffn_up = pack(p + "ffn_up.weight", ff, all_embd);
      l.ffn_down = pack(p + "ffn_down.weight", all_embd, ff);
    }
    s->layers.push_back(std::move(l));
  }

  s->attend = kernels::attend_kernel(isa, hp.head_dim);
  s->silu_mul = kernels::silu_mul_kernel(isa);
  const int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : hp.n_ctx;
  if (options.n_seq < 1) throw Error("engine", "need at least one sequence slot");
  s->kv = KvCache(spec.layer_end - spec.layer_begin, options.n_seq, n_ctx, s->n_head_kv * hd);
  return Shard(std::move(s));
}

void Shard::State::resolve_slice() {
  TensorSlice& slice = spec.slice;
  const bool moe = arch->moe;
  auto resolve = [](int64_t& begin, int64_t& end, int64_t n, const char* what) {
    if (end < 0) end = n;
    if (begin < 0 || begin > end || end > n) {
      throw Error("engine", std::string(what) + " [" + std::to_string(begin) + ", " +
                                std::to_string(end) + ") are outside the model's " +
                                std::to_string(n));
    }
    return end - begin;
  };
  n_head = resolve(slice.head_begin, slice.head_end, hp.n_head, "query heads");
  n_head_kv = resolve(slice.kv_head_begin, slice.kv_head_end, hp.n_head_kv, "KV heads");
  n_ff = resolve(slice.ff_begin, slice.ff_end, moe ? hp.n_ff_expert : hp.n_ff, "FFN rows");
  n_vocab = resolve(slice.vocab_begin, slice.vocab_end, hp.n_vocab, "vocabulary rows");
  if (n_head > 0) {
    const int64_t group = hp.n_head / hp.n_head_kv;
    const int64_t first = slice.head_begin / group, last = (slice.head_end - 1) / group;
    if (slice.kv_head_begin > first || slice.kv_head_end <= last) {
      throw Error("engine", "KV heads [" + std::to_string(slice.kv_head_begin) + ", " +
                                std::to_string(slice.kv_head_end) + ") miss some of [" +
                                std::to_string(first) + ", " + std::to_string(last + 1) +
                                "), which query heads [" + std::to_string(slice.head_begin) + ", " +
                                std::to_string(slice.head_end) + ") read");
    }
  }
  if (moe) {
    if (!slice.experts) {
      slice.experts.emplace(static_cast<size_t>(hp.n_expert));
      std::iota(slice.experts->begin(), slice.experts->end(), int64_t{0});
    }
    for (size_t i = 0; i < slice.experts->size(); ++i) {
      const int64_t e = (*slice.experts)[i];
      if (e < 0 || e >= hp.n_expert || (i > 0 && e <= (*slice.experts)[i - 1])) {
        throw Error("engine", "expert list must be ascending distinct ids below " +
                                  std::to_string(hp.n_expert) + " (has " + std::to_string(e) + ")");
      }
    }
    experts = *slice.experts;
  } else {
    slice.experts.reset();  // a dense model has no experts to slice
  }
  partial_sums = spec.layer_end > spec.layer_begin &&
                 (n_head < hp.n_head || n_ff < (moe ? hp.n_ff_expert : hp.n_ff) ||
                  static_cast<int64_t>(experts.size()) < (moe ? hp.n_expert : 0));
  sliced = partial_sums || (spec.output && n_vocab < hp.n_vocab);
}

void Shard::State::attention(int64_t il, const Batch& batch, ThreadPool& pool) {
  const int64_t n = batch.size();
  const int64_t hd = hp.head_dim;
  const int64_t q_dim = n_head * hd, kv_dim = n_head_kv * hd;  // the slice's
  const int64_t group = hp.n_head / hp.n_head_kv;
  // Query head h of the slice is the model's head_begin + h; it reads the model's KV head
  // (head_begin + h) / group, which is that minus kv_head_begin in the slice's cache.
  const int64_t head_begin = spec.slice.head_begin, kv_head_begin = spec.slice.kv_head_begin;
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
    for (int64_t h = 0; h < n_head; ++h) {
      if (!l.q_norm.empty()) rms_norm(qt + h * hd, l.q_norm.data(), hd, hp.rms_eps, qt + h * hd);
      rope_apply(qt + h * hd, hd, arch->rope_style, cos, sin);
    }
    for (int64_t h = 0; h < n_head_kv; ++h) {
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

  // Per (token, run of this shard's query heads that share a KV head): causal attention
  // over the sequence's cached positions [0, pos]; the kernel reads each cached row once for
  // the run's heads. A run is a whole GQA group unless the shard's heads cut one.
  struct HeadRun {
    int64_t head, n_heads, kv_head;
  };
  std::vector<HeadRun> runs;
  for (int64_t h = 0; h < n_head; ++h) {
    const int64_t g = (head_begin + h) / group - kv_head_begin;
    if (runs.empty() || runs.back().kv_head != g) runs.push_back({h, 0, g});
    ++runs.back().n_heads;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t n_ctx = kv.n_ctx();
  const auto n_runs = static_cast<int64_t>(runs.size());
  pool.run(n * n_runs, [&](int64_t task, int thread) {
    const int64_t t = task / n_runs;
    const HeadRun& r = runs[static_cast<size_t>(task % n_runs)];
    const int64_t n_pos = batch.pos[t] + 1;
    attend(q.data() + t * q_dim + r.head * hd, r.n_heads,
           kv.k(layer, batch.seq[t], 0) + r.kv_head * hd,
           kv.v(layer, batch.seq[t], 0) + r.kv_head * hd, kv_dim, n_pos, hd, scale,
           scores.data() + thread * group * n_ctx, attn.data() + t * q_dim + r.head * hd);
  });
}

void Shard::State::dense_ffn(const Layer& l, int64_t n, ThreadPool& pool) {
  const kernels::MatmulJob gate_up[] = {{&l.ffn_gate, ffn_a.data()}, {&l.ffn_up, ffn_b.data()}};
  kernels::matmul_batch(gate_up, h.data(), n, pool, workspace);
  pool.run(
      n, [&](int64_t t, int) { silu_mul(ffn_a.data() + t * n_ff, ffn_b.data() + t * n_ff, n_ff); });
  kernels::matmul(l.ffn_down, ffn_a.data(), n, ffn_out.data(), pool, workspace);
}

void Shard::State::moe_ffn(const Layer& l, int64_t n, ThreadPool& pool) {
  const int64_t n_embd = hp.n_embd, n_exp = hp.n_expert, n_used = hp.n_expert_used;
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
  // Each held expert runs once over the tokens routed to it (a tensor-parallel rank holds
  // some experts, or some rows of each: the all-reduce adds the other ranks' share).
  std::vector<int64_t> rows;
  std::vector<float> weights;
  for (size_t i_exp = 0; i_exp < l.gate_exps.size(); ++i_exp) {
    const int64_t e = experts[i_exp];
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
    const kernels::MatmulJob gate_up[] = {{&l.gate_exps[i_exp], moe_a.data()},
                                          {&l.up_exps[i_exp], moe_b.data()}};
    kernels::matmul_batch(gate_up, moe_in.data(), m, pool, workspace);
    for (int64_t i = 0; i < m; ++i)
      silu_mul(moe_a.data() + i * n_ff, moe_b.data() + i * n_ff, n_ff);
    kernels::matmul(l.down_exps[i_exp], moe_a.data(), m, moe_out.data(), pool, workspace);
    for (int64_t i = 0; i < m; ++i) {
      float* out = ffn_out.data() + rows[i] * n_embd;
      const float* y = moe_out.data() + i * n_embd;
      for (int64_t c = 0; c < n_embd; ++c) out[c] += weights[i] * y[c];
    }
  }
}

void Shard::forward(const Batch& batch, const float* input, std::vector<float>& output,
                    ThreadPool& pool, AllReduce* all_reduce) {
  State& s = *state_;
  const HParams& hp = s.hp;
  const int64_t n = batch.size();
  if (n == 0) {
    output.clear();
    return;
  }
  HERD_CHECK(static_cast<int64_t>(batch.seq.size()) == n &&
             static_cast<int64_t>(batch.pos.size()) == n);
  if (s.partial_sums && all_reduce == nullptr) {
    throw Error("engine",
                "a tensor-parallel slice of the model needs an all-reduce with the "
                "stage's other ranks");
  }
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
  const int64_t q_dim = s.n_head * hd, kv_dim = s.n_head_kv * hd;  // the slice's
  const int64_t n_ff = s.n_ff;
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
  // Per thread, the scores of one GQA group's heads.
  grow(s.scores, static_cast<int64_t>(pool.size()) * (hp.n_head / hp.n_head_kv) * s.kv.n_ctx());
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

  // A tensor-parallel rank's projections back to n_embd give partial sums over its heads /
  // FFN rows / experts: the ranks add them up before the residual, which every rank then
  // adds once (adding it, or any per-rank bias, before the sum would count it T times).
  // A rank with an empty range contributes zeros.
  float* proj = s.ffn_out.data();  // [n][n_embd]
  auto sharded_to_all = [&] {
    if (all_reduce != nullptr) all_reduce->sum(proj, static_cast<size_t>(n * n_embd));
  };
  for (int64_t il = s.spec.layer_begin; il < s.spec.layer_end; ++il) {
    const Layer& l = s.layers[static_cast<size_t>(il - s.spec.layer_begin)];
    float* h = s.h.data();
    pool.run(n, [&](int64_t t, int) {
      rms_norm(x + t * n_embd, l.attn_norm.data(), n_embd, hp.rms_eps, h + t * n_embd);
    });
    if (s.n_head > 0) {
      const kernels::MatmulJob qkv[] = {
          {&l.wq, s.q.data()}, {&l.wk, s.k.data()}, {&l.wv, s.v.data()}};
      kernels::matmul_batch(qkv, h, n, pool, s.workspace);
      s.attention(il, batch, pool);
      kernels::matmul(l.wo, s.attn.data(), n, proj, pool, s.workspace);
    } else {
      std::fill_n(proj, n * n_embd, 0.0f);
    }
    sharded_to_all();
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];

    pool.run(n, [&](int64_t t, int) {
      rms_norm(x + t * n_embd, l.ffn_norm.data(), n_embd, hp.rms_eps, h + t * n_embd);
    });
    if (s.arch->moe) {
      s.moe_ffn(l, n, pool);
    } else if (n_ff > 0) {
      s.dense_ffn(l, n, pool);
    } else {
      std::fill_n(proj, n * n_embd, 0.0f);
    }
    sharded_to_all();
    for (int64_t i = 0; i < n * n_embd; ++i) x[i] += proj[i];
  }

  if (!s.spec.output) {
    output.assign(x, x + n * n_embd);
    return;
  }
  // Only the tokens whose logits are wanted go through the head (every output rank norms
  // them: cheap, and saves a broadcast).
  int64_t m = 0;
  float* h = s.h.data();
  for (int64_t t = 0; t < n; ++t) {
    if (!batch.want_logits[t]) continue;
    rms_norm(x + t * n_embd, s.output_norm.data(), n_embd, hp.rms_eps, h + m * n_embd);
    ++m;
  }
  output.resize(static_cast<size_t>(m * s.n_vocab));  // [m][vocab_end - vocab_begin]
  if (s.n_vocab > 0) kernels::matmul(s.output, h, m, output.data(), pool, s.workspace);
}

}  // namespace herd::engine
