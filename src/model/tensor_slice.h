// TensorSlice: the part of a model's weights one tensor-parallel rank holds, and how it cuts
// each weight (TensorSpec::split says by which range and along which dimension). The shard
// loader, the coordinator that ships a rank only its part, and the rank's cache file that
// records what it holds (herd.slice.* metadata) all read the cut from here, so they agree
// on every byte.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/arch.h"
#include "quant/types.h"

namespace herd {

// The part of every layer (and of the output head) one tensor-parallel rank holds, as
// plan.h's Rank describes it. Ranges are half-open; an end of -1 means "through the last",
// so the default is the whole model (a stage of one rank). A range may be empty (the rank
// then contributes zeros to that all-reduce).
struct TensorSlice {
  int64_t head_begin = 0, head_end = -1;  // query heads: rows of attn_q, columns of attn_output
  // KV heads its query heads read: rows of attn_k / attn_v and the KV cache. Must contain
  // every KV head of [head_begin, head_end) (h / (n_head / n_head_kv)); may overlap another
  // rank's when a GQA group is cut (each computes and caches it itself).
  int64_t kv_head_begin = 0, kv_head_end = -1;
  // FFN rows: rows of ffn_gate / ffn_up, columns of ffn_down (of every held expert, MoE).
  int64_t ff_begin = 0, ff_end = -1;
  // MoE: the experts held (ascending, distinct); nullopt: every expert. Expert-parallel
  // ranks hold whole experts (ff range whole); split-experts ranks hold every expert's rows
  // [ff_begin, ff_end). The router is always whole.
  std::optional<std::vector<int64_t>> experts;
  int64_t vocab_begin = 0, vocab_end = -1;  // output-head rows (logits) computed
  // Runs the dense FFN layers and an MoE layer's shared experts (its FFN rows of them; of an
  // expert-parallel stage, the rank holding expert 0). false: a rank that holds routed experts
  // only, leaving those to the others (every expert on the CPU, the rest on a GPU). Not sent
  // to nodes yet: a node's slice always has it.
  bool dense_ffn = true;

  bool operator==(const TensorSlice&) const = default;
};

// What a slice keeps of one weight: elements [begin, end) of dimension `dim` (0: columns,
// within every row; 1: rows), and of an expert tensor ([cols, rows, n_expert]) the experts
// `experts`, in order (nullopt: every expert). dim -1: every row and column.
struct WeightCut {
  int dim = -1;
  int64_t begin = 0, end = 0;
  std::optional<std::vector<int64_t>> experts;
};

// The cut of the weight `spec` by `slice` (-1 ends resolved against hp). Not checked
// against the shape: cut_shape() does that.
WeightCut weight_cut(const TensorSpec& spec, const TensorSlice& slice, const HParams& hp);

// The shape of what `cut` keeps of the weight `name` of `type` and `shape` (GGUF order); a
// dimension may be 0 (the slice holds none of it). Throws herd::Error("model", ...) naming
// the tensor when the cut is outside the shape, experts are not ascending ids of the
// tensor's, or a column cut splits a quant block (a row must stay whole blocks).
std::vector<int64_t> cut_shape(std::string_view name, TensorType type,
                               const std::vector<int64_t>& shape, const WeightCut& cut);

// Calls run(offset, size) for each contiguous byte range of the GGUF data of a tensor of
// `type` and `shape` that `cut` keeps, in order: concatenated they are the cut tensor's
// GGUF data (a row cut is one range per expert, a column cut one per row).
// REQUIRES: cut_shape(name, type, shape, cut) does not throw.
void for_each_cut_run(TensorType type, const std::vector<int64_t>& shape, const WeightCut& cut,
                      const std::function<void(uint64_t offset, uint64_t size)>& run);

// A file whose tensors are a rank's cut records the slice and the model's vocabulary size
// (its cut output head no longer shows it) under herd.slice.*:
//   herd.slice.head, .kv_head, .ff, .vocab   i32[2]  begin, end (-1: through the last)
//   herd.slice.experts                       i32[]   the experts held (absent: every one)
//   herd.slice.n_vocab                       u64
void write_slice_metadata(gguf::Writer& writer, const TensorSlice& slice, int64_t n_vocab);
struct FileSlice {
  TensorSlice slice;
  int64_t n_vocab = 0;
};
// nullopt when the file holds whole tensors. Throws herd::Error("model", ...) naming the key
// when one is malformed (its ranges are checked against the tensors by read_model_info).
std::optional<FileSlice> read_slice_metadata(const gguf::File& file);

}  // namespace herd
