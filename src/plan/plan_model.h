// PlanModel: what the planner needs to know of a model: its shape, and the bytes of each
// part that can be placed on a stage or split across the ranks of a stage. Built from a
// GGUF file (plan_model_from) or made up for tests (synthetic_plan_model); the planner
// itself never touches a file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/arch.h"
#include "model/model_info.h"
#include "quant/types.h"

namespace herd {

// The weight bytes of one block (blk.N.*), grouped by how tensor parallelism splits them.
struct PlanLayer {
  uint64_t replicated_bytes = 0;  // attn_norm, ffn_norm, attn_q/k_norm, ffn_gate_inp (router):
                                  // every rank of a stage holds them whole
  uint64_t attn_q_bytes = 0;      // attn_q (+bias), attn_output: split by query head
  uint64_t attn_kv_bytes = 0;     // attn_k, attn_v (+biases): split by KV head
  uint64_t ffn_bytes = 0;         // ffn_gate/up/down, or all experts' ffn_*_exps: split by
                                  // FFN row (ffn_down by input column) and/or by expert

  // A linear-attention layer (Gated DeltaNet): a recurrent state per sequence, no KV cache.
  bool recurrent = false;
  // Besides the weights: the F16 keys and values it caches per position of one sequence,
  // all its KV heads (0: it reads an earlier layer's, Gemma 4's shared-KV layers).
  uint64_t kv_cache_bytes = 0;

  uint64_t total() const { return replicated_bytes + attn_q_bytes + attn_kv_bytes + ffn_bytes; }
  bool operator==(const PlanLayer&) const = default;
};

struct PlanModel {
  std::string arch;  // general.architecture, for display
  // The architecture's row and hyper-parameters: the shard reports its KV cache and scratch
  // from them (engine::Shard::sizes).
  const ArchSpec* arch_row = nullptr;
  HParams hp;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ctx_train = 0;
  int64_t n_ff = 0;           // FFN rows: the dense width, or the rows of one expert (MoE)
  int64_t n_expert = 0;       // 0: dense FFN
  int64_t n_expert_used = 0;  // experts each token runs through (MoE)
  bool tied_output = false;   // the output head is token_embd (no output.weight)

  uint64_t embedding_bytes = 0;    // token_embd
  uint64_t output_norm_bytes = 0;  // output_norm
  uint64_t output_bytes = 0;       // output.weight, or token_embd again when tied
  uint64_t global_bytes = 0;       // other tensors every rank needs (rope_freqs)
  // Elements per quant block of the rows whose columns a tensor split cuts: attn_output's
  // columns are split by query head, ffn_down's by FFN row. Slices keep blocks whole.
  int64_t attn_output_block = 1;
  int64_t ffn_down_block = 1;
  std::vector<PlanLayer> layers;  // [n_layer]
  // F32 state of one recurrent layer for one sequence (the conv window and the delta rule's
  // per-head matrices; engine/kv_cache.h's RecurrentShape).
  uint64_t recurrent_state_bytes = 0;
  // [n_layer] the earliest layer whose cache layers il.. read (il itself when none reads an
  // earlier one's): can_start_stage in O(1).
  std::vector<int64_t> earliest_kv_read;

  bool moe() const { return n_expert > 0; }
  // Whether a layer can be cut over tensor-parallel ranks: not yet with compressed attention
  // and its hyper-connections, nor where the layers differ in shape (layer_shapes(): the
  // engine refuses such a slice). Such models split by pipeline only.
  bool tensor_splittable() const {
    return arch_row == nullptr ||
           (arch_row->attention != AttentionKind::kCompressed && !arch_row->layer_shapes);
  }
  // Multiply-adds x 2 of one layer's matrices for one token (the experts a token runs
  // through, for MoE): the work of prefill, where a node's matmul speed sets the pace.
  double layer_flops_per_token() const;
  // Bytes of every weight of the model (token_embd counted once when tied).
  uint64_t weight_bytes() const;
  // F16 KV cache of one KV head of one layer for one position: K and V (MLA: the latent
  // and the rope key of its one KV head).
  uint64_t kv_bytes_per_head_per_token() const;
  // Layers of [begin, end) that keep a recurrent state instead of a KV cache.
  int64_t recurrent_layers(int64_t begin, int64_t end) const;
  // Whether a stage may begin at layer il: no layer from il on reads the cache of a layer
  // before it (Gemma 4's shared-KV layers and the layers they read stay in one stage).
  bool can_start_stage(int64_t il) const;
  // Layers differ in KV heads or head size (Gemma 4): the KV cache is the sum of the layers'
  // own (PlanLayer::kv_cache_bytes), and such a model is not cut by tensor parallelism.
  bool layer_shapes() const { return arch_row != nullptr && arch_row->layer_shapes; }
};

// Reads the per-tensor byte sizes of the model's tensors from its file.
// REQUIRES: info == read_model_info(file).
PlanModel plan_model_from(const ModelInfo& info, const gguf::File& file);

// A made-up model of this shape: 2-D weights in `type` (F16 for tensors whose rows are not
// whole blocks of it), norms and biases in F32. For tests and what-if planning.
PlanModel synthetic_plan_model(const ArchSpec& arch, const HParams& hp, TensorType type);

}  // namespace herd
