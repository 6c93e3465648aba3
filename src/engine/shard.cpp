#include "engine/shard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "engine/shard_state.h"
#include "quant/float16.h"
#include "util/error.h"

namespace herd::engine {
namespace {

using kernels::MatrixView;

// Largest head size the forward pass supports (rope angles live on the stack).
constexpr int64_t kMaxHeadDim = 1024;

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

Range scaled(Range r, int64_t unit) {
  return {r.begin * unit, r.end * unit};
}

}  // namespace

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
  for (const auto& copy : s.owned_copies) total += copy.size();
  for (const Layer& l : s.layers) {
    for (const PackedMatrix* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.wq_a, &l.wq_b, &l.wkv_a, &l.ffn_gate, &l.ffn_up,
          &l.ffn_down, &l.router, &l.delta_qkv, &l.delta_z, &l.delta_beta, &l.delta_alpha,
          &l.delta_ba, &l.delta_out}) {
      total += m->owned_bytes();
    }
    for (const auto* many : {&l.gate_exps, &l.up_exps, &l.down_exps, &l.k_b, &l.v_b}) {
      for (const PackedMatrix& m : *many) total += m.owned_bytes();
    }
  }
  return total;
}

std::span<const float> Shard::last_hidden() const {
  const State& s = *state_;
  return {s.x.data(), static_cast<size_t>(s.n_forwarded * s.hp.n_embd)};
}

const kernels::PackedMatrix* Shard::output_head() const {
  const State& s = *state_;
  return s.spec.output && s.device == nullptr && s.n_vocab > 0 ? &s.output : nullptr;
}

std::string Shard::device() const {
  return state_->device != nullptr ? state_->device->describe() : "cpu";
}
int Shard::device_index() const {
  return state_->device != nullptr ? state_->options.device.index : -1;
}
size_t Shard::device_bytes() const {
  return state_->device != nullptr ? state_->device->device_bytes() : 0;
}

Shard Shard::load(const gguf::File& file, const ModelInfo& info, const ShardSpec& spec_in,
                  const ShardOptions& options) {
  auto s = std::make_unique<State>();
  s->arch = info.arch;
  s->hp = info.hp;
  s->spec = spec_in;
  s->options = options;
  const ArchSpec& arch = *s->arch;
  const HParams& hp = s->hp;
  if (s->spec.layer_end < 0) s->spec.layer_end = hp.n_layer;
  const ShardSpec& spec = s->spec;
  if (spec.layer_begin < 0 || spec.layer_begin > spec.layer_end || spec.layer_end > hp.n_layer) {
    throw Error("engine", "layer range [" + std::to_string(spec.layer_begin) + ", " +
                              std::to_string(spec.layer_end) + ") is outside the model's " +
                              std::to_string(hp.n_layer) + " layers");
  }
  if (hp.head_dim > kMaxHeadDim || hp.head_dim % 2 != 0 || hp.n_rot % 2 != 0) {
    throw Error("engine", "head size " + std::to_string(hp.head_dim) +
                              " is not supported (even, at most " + std::to_string(kMaxHeadDim) +
                              ")");
  }
  if (options.n_seq < 1) throw Error("engine", "need at least one sequence slot");
  s->resolve_slice();
  if (arch.attention == AttentionKind::kCompressed && s->sliced) {
    throw Error("engine", std::string(arch.name) +
                              ": compressed attention and hyper-connections are not cut by "
                              "tensor or expert parallelism yet (pipeline stages only)");
  }
  const TensorSlice& slice = spec.slice;
  const int64_t hd = hp.head_dim, hdv = hp.head_dim_v;
  const Range heads{slice.head_begin, slice.head_end};
  const Range ff{slice.ff_begin, slice.ff_end};
  const Range vocab{slice.vocab_begin, slice.vocab_end};

  // A device shard reads the file's own bytes (uploaded as they are): nothing is repacked.
  const bool on_device = options.device.kind != Device::kCpu;
  const kernels::Isa isa = on_device ? kernels::Isa::kScalar : options.isa;
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
    if (packed.owned_bytes() == 0) s->owned_copies.push_back(std::move(copy));
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
  // The model's tensors as the file names them (model_info.cpp reads either spelling).
  const std::vector<TensorSpec>& all_tensors = info.tensors;
  auto file_name = [&](const std::string& name) {
    const TensorSpec* t = find_tensor_spec(info, name);
    if (t != nullptr || file.find_tensor(name) != nullptr) return name;
    const std::string alias = tensor_alias(name);
    return alias.empty() ? name : alias;
  };
  // A vector cut to the model's elements r of it (dimension 0).
  auto vector_slice = [&](const std::string& name, Range r) {
    return slice_of(load_vector(file.tensor(name)), in_file(name, 0, r));
  };

  if (spec.embedding || (spec.output && hp.tied_output))
    s->token_embd = &file.tensor("token_embd.weight");
  if (spec.output) {
    s->output_norm = load_vector(file.tensor("output_norm.weight"));
    s->output = pack(hp.tied_output ? "token_embd.weight" : "output.weight", vocab, all_embd);
  }
  if (const gguf::TensorInfo* f = file.find_tensor("rope_freqs.weight"))
    s->rope_freqs = load_vector(*f);
  if (spec.output && arch.hyper_connections) {
    s->output_hc_fn = pack(file_name("output_hc_fn.weight"), {0, hp.n_hc}, {0, hp.hidden_width()});
    s->output_hc_scale = load_vector(file.tensor(file_name("output_hc_scale.weight")));
    s->output_hc_base = load_vector(file.tensor(file_name("output_hc_base.weight")));
  }
  if (hp.n_embd_per_layer > 0 && spec.layer_end > spec.layer_begin) {
    // Every stage computes its own layers' per-layer inputs from the token ids.
    const int64_t p = hp.n_embd_per_layer;
    s->token_embd = &file.tensor("token_embd.weight");
    s->per_layer_embd = &file.tensor("per_layer_token_embd.weight");
    const TypeTraits& tt = type_traits(s->per_layer_embd->type);
    if (p % tt.block_size != 0) {
      throw Error("engine", "per_layer_token_embd.weight: a layer's " + std::to_string(p) +
                                " values are not whole " + std::string(tt.name) + " blocks of " +
                                std::to_string(tt.block_size));
    }
    s->per_layer_model_proj =
        pack("per_layer_model_proj.weight", {spec.layer_begin * p, spec.layer_end * p}, all_embd);
    s->per_layer_proj_norm = load_vector(file.tensor("per_layer_proj_norm.weight"));
  }

  // Per held head h of an MLA layer: attn_k_b's rows [h kv_lora, (h + 1) kv_lora) and
  // attn_v_b's [h hdv, (h + 1) hdv) (the same bytes in the 2-D and the per-head 3-D form).
  auto pack_mla_heads = [&](const TensorSpec& t, Layer& l) {
    if (heads.size() == 0) return;  // no heads: no attention (a cut file holds none of it)
    const bool is_k = t.weight == LayerWeight::kAttnKB;
    const int64_t nope = hd - hp.n_rot, kv_lora = hp.kv_lora_rank;
    const int64_t rows = is_k ? kv_lora : hdv, cols = is_k ? nope : kv_lora;
    const gguf::TensorInfo& b = file.tensor(t.name);
    const Range held = in_file(t.name, 1, scaled(heads, rows));
    const size_t row = row_bytes(b.type, cols);
    for (int64_t h = 0; h < heads.size(); ++h) {
      const MatrixView view{b.type, rows, cols,
                            b.data + row * static_cast<size_t>(held.begin + h * rows)};
      (is_k ? l.k_b : l.v_b).push_back(kernels::pack_matrix(view, isa));
      (is_k ? l.w_k : l.w_v).push_back(view);
    }
    if (is_k) l.w_k_transposed = true;
  };
  // Only attn_kv_b (older files): head h's rows are [k_nope (nope) | v (hdv)] over the
  // latent. v_b is a view of its v rows; k_b is its k rows transposed ([kv_lora x nope]),
  // made here in f32.
  auto unpack_kv_b = [&](const TensorSpec& t, Layer& l) {
    if (heads.size() == 0) return;
    const int64_t nope = hd - hp.n_rot, kv_lora = hp.kv_lora_rank;
    const gguf::TensorInfo& kvb = file.tensor(t.name);
    const Range rows = in_file(t.name, 1, scaled(heads, nope + hdv));
    const size_t row = row_bytes(kvb.type, kv_lora);
    std::vector<float> k_rows(static_cast<size_t>(nope * kv_lora));
    for (int64_t h = 0; h < heads.size(); ++h) {
      const uint8_t* head = kvb.data + row * static_cast<size_t>(rows.begin + h * (nope + hdv));
      type_traits(kvb.type).dequantize(head, k_rows.data(), nope * kv_lora);
      std::vector<uint8_t> bytes(static_cast<size_t>(kv_lora * nope) * sizeof(float));
      float* kt = reinterpret_cast<float*>(bytes.data());  // [kv_lora][nope]
      for (int64_t r = 0; r < nope; ++r) {
        for (int64_t c = 0; c < kv_lora; ++c)
          kt[c * nope + r] = k_rows[static_cast<size_t>(r * kv_lora + c)];
      }
      PackedMatrix kp = kernels::pack_matrix({TensorType::F32, kv_lora, nope, bytes.data()}, isa);
      if (kp.owned_bytes() == 0) s->owned_copies.push_back(std::move(bytes));
      l.k_b.push_back(std::move(kp));
      const MatrixView v_rows{kvb.type, hdv, kv_lora, head + row * static_cast<size_t>(nope)};
      l.v_b.push_back(kernels::pack_matrix(v_rows, isa));
      l.w_k.push_back({kvb.type, nope, kv_lora, head});
      l.w_v.push_back(v_rows);
    }
  };
  // An int32 table as stored (ffn_gate_tid2eid: expert ids, each checked).
  auto load_ids = [&](const TensorSpec& t, std::vector<int32_t>& out) {
    const gguf::TensorInfo& info_t = file.tensor(t.name);
    if (info_t.type != TensorType::I32) {
      throw Error("engine", "tensor '" + t.name + "' must be i32");
    }
    out.resize(static_cast<size_t>(info_t.n_elements));
    std::memcpy(out.data(), info_t.data, out.size() * sizeof(int32_t));
    for (int32_t e : out) {
      if (e < 0 || e >= hp.n_expert) {
        throw Error("engine", "tensor '" + t.name + "' names expert " + std::to_string(e) + " of " +
                                  std::to_string(hp.n_expert));
      }
    }
  };
  // What the shard keeps of block tensor t: the slice's cut, or all of it when the shard
  // holds its layers whole (whose widths may differ per layer, Gemma 4's FFN).
  auto cut_of = [&](const TensorSpec& t) {
    return s->partial_sums ? weight_cut(t, slice, hp) : WeightCut{};
  };
  // Loads block tensor t into its member of l, cut as the slice says (model/arch.cpp).
  auto bind = [&](const TensorSpec& t, Layer& l) {
    const LayerMember member = layer_member(t.weight);
    if (t.weight == LayerWeight::kGateUpExps) {
      // Per expert [2 n_ff_expert rows: gate, then up]: the slice's FFN rows of each half.
      if (ff.size() == 0 || s->experts.empty()) return;
      const gguf::TensorInfo& all = file.tensor(t.name);
      const int64_t half = t.shape[1] / 2;
      bool copied = false;
      for (int64_t e : s->experts) {
        const MatrixView m = expert_view(all, expert_in_file(t.name, e));
        l.gate_exps.push_back(pack_slice(m, t.name, ff, all_embd, copied));
        l.up_exps.push_back(
            pack_slice(m, t.name, {half + ff.begin, half + ff.end}, all_embd, copied));
      }
      release_if_copied(all, copied);
      return;
    }
    const WeightCut cut = cut_of(t);
    const Range whole_cols{0, t.shape[0]};
    const Range cols = cut.dim == 0 ? Range{cut.begin, cut.end} : whole_cols;
    if (member.ids != nullptr) {
      load_ids(t, l.*member.ids);
    } else if (t.weight == LayerWeight::kAttnOutputA) {
      // One matrix per output group: its o_lora rows read the group's heads' outputs.
      const int64_t rows = hp.o_lora_rank;
      for (int64_t g = 0; g < hp.n_out_group; ++g) {
        l.wo_a.push_back(pack(t.name, {g * rows, (g + 1) * rows}, whole_cols));
      }
    } else if (member.matrix != nullptr) {
      const Range whole_rows{0, t.shape.size() > 1 ? t.shape[1] : 1};
      const Range rows = cut.dim == 1 ? Range{cut.begin, cut.end} : whole_rows;
      l.*member.matrix = pack(t.name, rows, cols);
    } else if (member.values != nullptr && !t.per_expert && t.shape.size() > 1) {
      // A small 2-D table every rank holds whole (ssm_conv1d, a compressor's position
      // embeddings).
      HERD_CHECK(t.split == SplitBy::kNone);
      l.*member.values = load_vector(file.tensor(t.name));
    } else if (member.values != nullptr && !t.per_expert) {
      l.*member.values = cols.size() > 0 ? vector_slice(t.name, cols) : std::vector<float>();
    } else if (member.values != nullptr) {
      // [rows, n_expert] in the file: one row per expert, of the expert's FFN rows. A down
      // bias is added once per expert: by the rank holding its first FFN rows.
      if (cols.size() == 0 || ff.size() == 0 || s->experts.empty()) return;
      if (t.weight == LayerWeight::kDownExpsBias && slice.ff_begin != 0) return;
      const gguf::TensorInfo& info_t = file.tensor(t.name);
      const std::vector<float> all = load_vector(info_t);
      const Range c = in_file(t.name, 0, cols);
      for (int64_t e : s->experts) {
        const float* row = all.data() + expert_in_file(t.name, e) * info_t.shape[0];
        (l.*member.values).insert((l.*member.values).end(), row + c.begin, row + c.end);
      }
    } else if (t.per_expert) {
      // An expert tensor [cols, rows, n_expert]: each held expert's cut.
      const Range rows = cut.dim == 1 ? Range{cut.begin, cut.end} : Range{0, t.shape[1]};
      if (rows.size() == 0 || cols.size() == 0 || s->experts.empty()) return;
      const gguf::TensorInfo& all = file.tensor(t.name);
      bool copied = false;
      for (int64_t e : s->experts) {
        (l.*member.matrices)
            .push_back(pack_slice(expert_view(all, expert_in_file(t.name, e)), t.name, rows, cols,
                                  copied));
      }
      release_if_copied(all, copied);
    } else if (t.weight == LayerWeight::kAttnKvB) {
      // Read only when the file lacks attn_k_b / attn_v_b.
      if (!hp.mla_split_b) unpack_kv_b(t, l);
    } else if (member.matrices != nullptr) {
      pack_mla_heads(t, l);
    }
  };
  std::vector<std::vector<const TensorSpec*>> layer_tensors(static_cast<size_t>(hp.n_layer));
  for (const TensorSpec& t : all_tensors) {
    if (t.layer >= 0) layer_tensors[static_cast<size_t>(t.layer)].push_back(&t);
  }
  // Parts every rank would otherwise compute whole (dense layers and shared experts of an
  // expert-parallel stage, whose FFN range is whole): the rank holding expert 0 does.
  const bool whole_ffn_once = s->experts.empty() ||
                              static_cast<int64_t>(s->experts.size()) == hp.n_expert ||
                              s->experts.front() == 0;
  const int64_t per_call = s->max_heads_per_call();
  for (int64_t il = spec.layer_begin; il < spec.layer_end; ++il) {
    Layer l;
    l.options = layer_options(arch, hp, il);
    const LayerOptions& lo = l.options;
    if (lo.kv_layer < spec.layer_begin || lo.kv_layer > il) {
      throw Error("engine", "layer " + std::to_string(il) + " reads the keys and values of layer " +
                                std::to_string(lo.kv_layer) +
                                ", which is not in the shard's layers " +
                                range_text({spec.layer_begin, spec.layer_end}));
    }
    const bool factors = lo.rope_freqs && !s->rope_freqs.empty();
    l.rope = make_rope(arch, hp, lo, factors ? s->rope_freqs.data() : nullptr);
    l.attn_scale = attention_scale(arch, hp, lo);
    if (arch.attention == AttentionKind::kCompressed) {
      l.attend = kernels::attend_kernel(isa, lo.head_dim, lo.head_dim);  // K = V
    } else if (arch.attention == AttentionKind::kMla) {
      l.attend = kernels::attend_kernel(isa, hp.kv_lora_rank + hp.n_rot, hp.kv_lora_rank);
    } else {
      l.attend = kernels::attend_kernel(isa, lo.head_dim, lo.head_dim_v);
    }
    // The slice's query heads in runs that share a KV head, at most max_heads_per_call()
    // each, so that one token's attention spreads over several threads.
    const int64_t group = hp.n_head / lo.n_head_kv;
    for (int64_t h = 0; h < s->n_head; ++h) {
      const int64_t g = (slice.head_begin + h) / group - slice.kv_head_begin;
      if (l.head_runs.empty() || l.head_runs.back().kv_head != g ||
          l.head_runs.back().n_heads == std::min(per_call, group)) {
        l.head_runs.push_back({h, 0, g});
      }
      ++l.head_runs.back().n_heads;
    }
    for (const TensorSpec* t : layer_tensors[static_cast<size_t>(il)]) {
      if (is_delta_weight(t->weight)) continue;  // load_linear cuts them by head
      bind(*t, l);
      // The dense FFN's (or shared experts') rows held: gate's cut (model/arch.cpp says by
      // how much a slice's FFN range cuts them).
      if (t->weight == LayerWeight::kFfnGate) {
        const WeightCut cut = cut_of(*t);
        l.n_ff = cut.dim == 1 ? cut.end - cut.begin : t->shape[1];
      }
    }
    if (l.options.linear) s->load_linear(file, l, il);
    if (l.options.moe) {
      // The shared experts, or Gemma 4's dense FFN beside the experts.
      l.ffn_runs = (hp.n_expert_shared > 0 || arch.moe_beside_dense) && l.n_ff > 0 &&
                   whole_ffn_once && slice.dense_ffn;
    } else {
      l.ffn_runs = l.n_ff > 0 && (hp.n_expert == 0 || whole_ffn_once) && slice.dense_ffn;
    }
    // The router reads RMSNorm(x) * scale / sqrt(n_embd) (the reference folds it in at load).
    for (float& x : l.router_scale) x /= std::sqrt(static_cast<float>(hp.n_embd));
    s->layers.push_back(std::move(l));
  }

  s->silu_mul = kernels::silu_mul_kernel(isa);
  if (hp.n_expert > 0) s->router = std::make_unique<Router>(router_options(hp));
  const ShardSizes sizes = Shard::sizes(info, spec, options);
  if (arch.attention == AttentionKind::kCompressed) {
    // Its state is the compressed cache (the KV cache keeps only the slots' shape).
    s->ckv = CompressedKvCache(compressed_cache_shape(arch, hp, spec, options.n_seq, sizes.n_ctx));
    for (size_t i = 0; i < s->layers.size(); ++i) {
      s->compressed.reserve(s->compressed_options(s->layers[i]),
                            s->ckv.n_entries(static_cast<int64_t>(i)),
                            std::max<int64_t>(1, options.n_batch), std::max(1, options.n_threads));
    }
  }
  if (on_device) {
    // The keys and values and the recurrent states live on the device: the host's cache
    // keeps only the slots' shape (and their recurrent positions).
    CacheLayout shape = sizes.cache;
    for (CacheLayer& layer : shape.layers) layer.k_dim = layer.v_dim = 0;
    shape.recurrent = {};
    s->kv = KvCache(shape);
  } else {
    s->kv = KvCache(sizes.cache);
  }
  if (on_device) {
    s->device = make_vulkan_backend(*s, file, info, options.device.index, options.upload_progress);
  } else {
    s->reserve(std::max<int64_t>(1, options.n_batch), std::max(1, options.n_threads));
  }
  return Shard(std::move(s));
}

void Shard::State::resolve_slice() {
  TensorSlice& slice = spec.slice;
  const bool moe = hp.n_expert > 0;
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
  if (arch->delta_net) resolve_delta_slice();
  partial_sums = spec.layer_end > spec.layer_begin &&
                 (n_head < hp.n_head || n_ff < (moe ? hp.n_ff_expert : hp.n_ff) ||
                  static_cast<int64_t>(experts.size()) < (moe ? hp.n_expert : 0));
  sliced = partial_sums || (spec.output && n_vocab < hp.n_vocab);
  if (partial_sums && arch->layer_shapes) {
    // Its layers differ in KV heads and head size, its MoE layers norm the dense and expert
    // outputs before adding them: one slice of heads, rows or experts does not fit them all.
    throw Error("engine", "tensor parallelism is not supported for " + std::string(arch->name) +
                              " (its layers differ in shape); split it by layers (pipeline)");
  }
}

ShardSizes Shard::sizes(const ModelInfo& info, const ShardSpec& spec, const ShardOptions& options) {
  Shard::State s;
  s.arch = info.arch;
  s.hp = info.hp;
  s.spec = spec;
  s.options = options;
  if (s.spec.layer_end < 0) s.spec.layer_end = info.hp.n_layer;
  s.resolve_slice();
  const HParams& hp = info.hp;
  ShardSizes z;
  z.n_ctx = options.n_ctx > 0 ? options.n_ctx : hp.n_ctx;
  if (info.arch->attention == AttentionKind::kCompressed) {
    // The raw window, compressor rings and compressed entries (compressed_kv_cache.h); the
    // KV cache has no layers.
    z.cache.n_seq = options.n_seq;
    z.cache.n_ctx = z.n_ctx;
    z.kv_bytes = CompressedKvCache::bytes_for(
        compressed_cache_shape(*info.arch, hp, s.spec, options.n_seq, z.n_ctx));
    z.scratch_bytes =
        s.scratch_sizes(std::max<int64_t>(1, options.n_batch), std::max(1, options.n_threads))
            .bytes() +
        compressed_scratch_bytes(s, z.n_ctx, std::max<int64_t>(1, options.n_batch),
                                 std::max(1, options.n_threads));
    return z;
  }
  z.cache = s.cache_layout(z.n_ctx);
  z.kv_bytes = KvCache::bytes_for(z.cache);
  z.scratch_bytes =
      s.scratch_sizes(std::max<int64_t>(1, options.n_batch), std::max(1, options.n_threads))
          .bytes();
  return z;
}

void Shard::forward(const Batch& batch, const float* input, std::vector<float>& output,
                    ThreadPool& pool, AllReduce* all_reduce) {
  State& s = *state_;
  const ArchSpec& arch = *s.arch;
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
    if ((s.spec.embedding || s.per_layer_embd != nullptr) &&
        (batch.tokens[t] < 0 || batch.tokens[t] >= hp.n_vocab)) {
      throw Error("engine", "token id " + std::to_string(batch.tokens[t]) +
                                " is outside the vocabulary of " + std::to_string(hp.n_vocab));
    }
  }
  if (s.device != nullptr) {
    // The recurrent states are on the device; their positions are checked here all the same.
    // Compressed attention's slot lengths (the batch's checks, snapshots' positions) are
    // kept here for a device too; its rows live there, every position's, so a slot's prefix
    // stays valid without the host's rings (vulkan_ds4.cpp).
    const bool compressed = arch.attention == AttentionKind::kCompressed;
    s.kv.begin_recurrent(batch);
    if (compressed) s.compressed_begin(batch);
    s.device->forward(batch, input, output, all_reduce);
    if (compressed) s.compressed_end(batch);
    s.kv.end_recurrent(batch);
    return;
  }
  s.reserve(n, static_cast<int>(pool.size()));
  s.n_forwarded = 0;
  // Checks that the batch continues each slot's recurrent states (before anything changes).
  s.kv.begin_recurrent(batch);
  if (arch.attention == AttentionKind::kCompressed) s.compressed_begin(batch);

  const int64_t n_embd = hp.n_embd, width = hp.hidden_width();
  // [n][width] activations entering the first layer: n_hc copies of the token's embedding
  // with hyper-connections ([n][n_hc][n_embd]), else [n][n_embd].
  float* x = s.x.data();
  // The batch's token embeddings into out [n][streams][n_embd], one copy per stream.
  auto embed = [&](float* out, int64_t streams) {
    const TypeTraits& tt = type_traits(s.token_embd->type);
    const size_t row = row_bytes(s.token_embd->type, n_embd);
    const float scale = arch.embed_scale ? std::sqrt(static_cast<float>(n_embd)) : 1.0f;
    for (int64_t t = 0; t < n; ++t) {
      float* xt = out + t * streams * n_embd;
      tt.dequantize(s.token_embd->data + row * static_cast<size_t>(batch.tokens[t]), xt, n_embd);
      if (scale != 1.0f) {
        for (int64_t i = 0; i < n_embd; ++i) xt[i] *= scale;
      }
      for (int64_t c = 1; c < streams; ++c) std::copy_n(xt, n_embd, xt + c * n_embd);
    }
  };
  if (s.spec.embedding) {
    embed(x, hp.n_hc);
  } else {
    HERD_CHECK(input != nullptr);
    std::copy_n(input, n * width, x);
  }
  if (s.per_layer_embd != nullptr) {
    // Per-layer inputs read the token embedding itself, wherever the stage starts.
    if (!s.spec.embedding) embed(s.h.data(), 1);
    s.per_layer_inputs(batch, s.spec.embedding ? x : s.h.data(), pool);
  }

  // A tensor-parallel rank's projections back to n_embd give partial sums over its heads /
  // FFN rows / experts: the ranks add them up before the residual, which every rank then
  // adds once (adding it, or any per-rank bias, before the sum would count it T times).
  // A rank with an empty range contributes zeros.
  float* proj = s.ffn_out.data();  // [n][n_embd]
  float* h = s.h.data();
  // x += norm(proj) (sandwich) or x += proj, once the ranks' shares are summed.
  auto add_branch = [&](const std::vector<float>& post_norm, const std::vector<float>& bias) {
    if (all_reduce != nullptr) all_reduce->sum(proj, static_cast<size_t>(n * n_embd));
    pool.run(n, [&](int64_t t, int) {
      float* pt = proj + t * n_embd;
      if (!bias.empty()) {
        for (int64_t i = 0; i < n_embd; ++i) pt[i] += bias[static_cast<size_t>(i)];
      }
      if (!post_norm.empty()) rms_norm(pt, post_norm.data(), n_embd, hp.rms_eps, pt);
      float* xt = x + t * n_embd;
      for (int64_t i = 0; i < n_embd; ++i) xt[i] += pt[i];
    });
  };
  for (int64_t il = s.spec.layer_begin; il < s.spec.layer_end; ++il) {
    const Layer& l = s.layers[static_cast<size_t>(il - s.spec.layer_begin)];
    if (arch.hyper_connections) {
      // The sublayers read and write the residual streams through their mixes.
      s.hc_pre(l.hc_attn_fn, l.hc_attn_scale, l.hc_attn_base, l.attn_norm, n, pool);
      s.compressed_attention_layer(l, il - s.spec.layer_begin, batch, pool, proj);
      s.hc_post(proj, n, pool);
      s.hc_pre(l.hc_ffn_fn, l.hc_ffn_scale, l.hc_ffn_base, l.ffn_norm, n, pool);
      s.ffn(l, n, pool, batch);
      s.hc_post(proj, n, pool);
      continue;
    }
    pool.run(n, [&](int64_t t, int) {
      rms_norm(x + t * n_embd, l.attn_norm.data(), n_embd, hp.rms_eps, h + t * n_embd);
    });
    if (l.options.linear) {
      // A rank runs its V heads (none: it adds zeros).
      if (s.delta_dims.n_v_heads > 0) {
        s.linear_attention(l, il - s.spec.layer_begin, batch, pool, proj);
      } else {
        std::fill_n(proj, n * n_embd, 0.0f);
      }
    } else if (s.n_head > 0) {
      s.attention(il, batch, pool, all_reduce);
      kernels::matmul(l.wo, s.attn.data(), n, proj, pool, s.workspace);
    } else {
      // No heads: zeros to the whole-row q/k norm's sums, as to the output's.
      if (s.qk_row_sums() && all_reduce != nullptr) {
        std::fill_n(s.qk_sums.data(), 2 * n, 0.0f);
        all_reduce->sum(s.qk_sums.data(), static_cast<size_t>(2 * n));
      }
      std::fill_n(proj, n * n_embd, 0.0f);
    }
    add_branch(l.post_attn_norm, l.bo);

    pool.run(n, [&](int64_t t, int) {
      rms_norm(x + t * n_embd, l.ffn_norm.data(), n_embd, hp.rms_eps, h + t * n_embd);
    });
    if (l.options.moe && arch.moe_beside_dense) {
      s.moe_beside_dense_ffn(l, x, n, pool, batch);
    } else {
      s.ffn(l, n, pool, batch);
    }
    add_branch(l.post_ffn_norm, {});
    if (s.per_layer_embd != nullptr) s.add_per_layer_input(l, il - s.spec.layer_begin, x, n, pool);
    if (!l.out_scale.empty()) {
      const float scale = l.out_scale[0];
      for (int64_t i = 0; i < n * n_embd; ++i) x[i] *= scale;
    }
  }

  s.kv.end_recurrent(batch);
  if (arch.attention == AttentionKind::kCompressed) s.compressed_end(batch);
  s.n_forwarded = arch.hyper_connections ? 0 : n;

  if (!s.spec.output) {
    output.assign(x, x + n * width);
    return;
  }
  if (arch.hyper_connections) s.hc_head(batch, pool);  // x [n][n_embd]: the streams reduced
  // Only the tokens whose logits are wanted go through the head (every output rank norms
  // them: cheap, and saves a broadcast).
  int64_t m = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (!batch.want_logits[t]) continue;
    rms_norm(x + t * n_embd, s.output_norm.data(), n_embd, hp.rms_eps, h + m * n_embd);
    ++m;
  }
  output.resize(static_cast<size_t>(m * s.n_vocab));  // [m][vocab_end - vocab_begin]
  if (s.n_vocab > 0) kernels::matmul(s.output, h, m, output.data(), pool, s.workspace);
  if (hp.final_softcap > 0) {
    const float cap = hp.final_softcap;
    for (float& logit : output) logit = cap * std::tanh(logit / cap);
  }
}

}  // namespace herd::engine
