#include "plan/plan_model.h"

#include <algorithm>
#include <string_view>

#include "util/error.h"

namespace herd {
namespace {

// The PlanModel fields of the hyper-parameters, with no bytes yet.
PlanModel shape_of(const ArchSpec& arch, const HParams& hp) {
  PlanModel m;
  m.arch = std::string(arch.name);
  m.arch_row = &arch;
  m.hp = hp;
  m.n_vocab = hp.n_vocab;
  m.n_embd = hp.n_embd;
  m.n_layer = hp.n_layer;
  m.n_head = hp.n_head;
  m.n_head_kv = hp.n_head_kv;
  m.head_dim = hp.head_dim;
  m.n_ctx_train = hp.n_ctx;
  const bool moe = hp.n_expert > 0;
  m.n_ff = moe ? hp.n_ff_expert : hp.n_ff;
  m.n_expert = moe ? hp.n_expert : 0;
  m.n_expert_used = moe ? hp.n_expert_used : 0;
  m.tied_output = hp.tied_output;
  m.layers.assign(static_cast<size_t>(std::max<int64_t>(hp.n_layer, 0)), PlanLayer{});
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerOptions lo = layer_options(arch, hp, il);
    PlanLayer& l = m.layers[static_cast<size_t>(il)];
    l.recurrent = lo.linear;
    const int64_t values = arch.attention == AttentionKind::kMla
                               ? hp.kv_lora_rank + hp.n_rot
                               : lo.n_head_kv * (lo.head_dim + lo.head_dim_v);
    l.kv_cache_bytes = lo.own_kv && !lo.linear ? 2 * static_cast<uint64_t>(values) : 0;
  }
  if (arch.delta_net) {
    const int64_t conv_dim =
        2 * hp.delta_n_k_heads * hp.delta_head_k + hp.delta_n_v_heads * hp.delta_head_v;
    m.recurrent_state_bytes =
        4 * static_cast<uint64_t>((hp.delta_conv_kernel - 1) * conv_dim +
                                  hp.delta_n_v_heads * hp.delta_head_k * hp.delta_head_v);
  }
  m.earliest_kv_read.assign(m.layers.size(), 0);
  int64_t earliest = hp.n_layer;
  for (int64_t il = hp.n_layer - 1; il >= 0; --il) {
    earliest = std::min({earliest, il, layer_options(arch, hp, il).kv_layer});
    m.earliest_kv_read[static_cast<size_t>(il)] = earliest;
  }
  return m;
}

// Adds one tensor's bytes to the group that tensor parallelism splits it with: the tensor
// list says how each weight is cut (model/arch.cpp), so no name is parsed here.
// block_size: elements per block of the tensor's type.
void add_tensor(PlanModel& m, const TensorSpec& t, uint64_t bytes, int64_t block_size) {
  if (t.layer < 0) {
    if (t.role == TensorRole::kEmbedding) {
      m.embedding_bytes += bytes;
      if (m.tied_output) m.output_bytes += bytes;
    } else if (t.role == TensorRole::kOutput) {
      m.output_bytes += bytes;
    } else if (t.role == TensorRole::kNorm) {
      m.output_norm_bytes += bytes;
    } else {
      m.global_bytes += bytes;
    }
    return;
  }
  HERD_CHECK(t.layer < m.n_layer);
  PlanLayer& layer = m.layers[static_cast<size_t>(t.layer)];
  switch (t.split) {
    case SplitBy::kHeads:
      layer.attn_q_bytes += bytes;
      // Columns cut by query head (attn_output): the slices must keep whole blocks.
      if (t.split_dim == 0 && t.shape.size() >= 2)
        m.attn_output_block = std::max(m.attn_output_block, block_size);
      return;
    case SplitBy::kKvHeads:
      layer.attn_kv_bytes += bytes;
      return;
    case SplitBy::kFf:
      layer.ffn_bytes += bytes;
      if (t.split_dim == 0 && t.shape.size() >= 2)
        m.ffn_down_block = std::max(m.ffn_down_block, block_size);
      return;
    default:  // norms, routers, MLA's latent projections: every rank needs them whole
      // (per-expert tensors not cut by FFN row are still cut by expert: count them there).
      if (t.per_expert) {
        layer.ffn_bytes += bytes;
      } else {
        layer.replicated_bytes += bytes;
      }
      return;
  }
}

}  // namespace

uint64_t PlanModel::weight_bytes() const {
  uint64_t total = embedding_bytes + output_norm_bytes + global_bytes;
  if (!tied_output) total += output_bytes;
  for (const PlanLayer& l : layers) total += l.total();
  return total;
}

uint64_t PlanModel::kv_bytes_per_head_per_token() const {
  if (arch_row != nullptr && arch_row->attention == AttentionKind::kMla) {
    return 2 * static_cast<uint64_t>(hp.kv_lora_rank + hp.n_rot);
  }
  return 2 * 2 * static_cast<uint64_t>(head_dim);
}

int64_t PlanModel::recurrent_layers(int64_t begin, int64_t end) const {
  int64_t n = 0;
  for (int64_t il = begin; il < end; ++il) n += layers[static_cast<size_t>(il)].recurrent;
  return n;
}

bool PlanModel::can_start_stage(int64_t il) const {
  if (il <= 0 || il >= static_cast<int64_t>(earliest_kv_read.size())) return true;
  return earliest_kv_read[static_cast<size_t>(il)] >= il;
}

double PlanModel::layer_flops_per_token() const {
  const double q = static_cast<double>(n_head * head_dim);
  const double kv = static_cast<double>(n_head_kv * head_dim);
  const double ffn =
      3.0 * static_cast<double>(n_ff) * static_cast<double>(moe() ? n_expert_used : 1);
  return 2.0 * static_cast<double>(n_embd) * (2 * q + 2 * kv + ffn);
}

PlanModel plan_model_from(const ModelInfo& info, const gguf::File& file) {
  HERD_CHECK(info.arch != nullptr);
  PlanModel m = shape_of(*info.arch, info.hp);
  for (const TensorSpec& spec : info.tensors) {
    const gguf::TensorInfo& t = file.tensor(spec.name);
    add_tensor(m, spec, t.n_bytes, type_traits(t.type).block_size);
  }
  if (info.has_rope_freqs) m.global_bytes += file.tensor("rope_freqs.weight").n_bytes;
  return m;
}

PlanModel synthetic_plan_model(const ArchSpec& arch, const HParams& hp, TensorType type) {
  PlanModel m = shape_of(arch, hp);
  for (const TensorSpec& spec : model_tensors(arch, hp)) {
    TensorType t = TensorType::F32;
    if (spec.shape.size() >= 2) {
      t = spec.shape[0] % type_traits(type).block_size == 0 ? type : TensorType::F16;
    }
    int64_t rows = 1;
    for (size_t i = 1; i < spec.shape.size(); ++i) rows *= spec.shape[i];
    add_tensor(m, spec, row_bytes(t, spec.shape[0]) * static_cast<uint64_t>(rows),
               type_traits(t).block_size);
  }
  return m;
}

}  // namespace herd
