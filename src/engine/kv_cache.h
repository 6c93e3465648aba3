// The per-sequence cache of a shard's layers: for an attention layer the keys and values of
// every position of every sequence slot, in F16 (half the bytes of F32; attention converts on
// the fly); for a linear-attention layer (Gated DeltaNet) one fixed-size recurrent state per
// slot, in F32. A slot is one sequence.
//
// Attention cells are indexed by position, so a sequence's KV cache is the prefix [0, length)
// and can be cut back to any shorter prefix. Each attention layer has its own row widths
// (Gemma 4's sliding and global layers differ in KV heads and head size); a layer that reads
// another layer's keys and values caches nothing (widths 0). Keys and values may differ in
// size; multi-head latent attention caches one row per token (the latent and the rope key)
// and no values (v_dim 0: attention reads the values from the key row).
//
// A recurrent state has absorbed every token of its sequence and cannot be cut back: the
// cache tracks, per slot, how many positions it has absorbed (recurrent_pos), a batch must
// continue a slot exactly there or start it again at position 0 (which zeroes it: that is also
// what makes recovery by replay correct), and whoever wants to return to an earlier prefix
// (serving's prefix reuse, speculative decoding) keeps a snapshot taken there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/batch.h"

namespace herd::engine {

// What one layer keeps per sequence slot.
enum class LayerCache : uint8_t {
  kKv,         // keys and values of every position
  kRecurrent,  // a recurrent state (RecurrentShape)
};

// One linear-attention layer's state of one slot, f32:
//   | conv: [conv_rows][conv_dim] last inputs, oldest first | delta: [n_v_heads][dk][dv] |
// (a tensor-parallel rank holds its heads' channels and V heads only).
struct RecurrentShape {
  int64_t conv_rows = 0;  // conv_kernel - 1
  int64_t conv_dim = 0;   // q, k and v channels of the convolution
  int64_t n_v_heads = 0, dk = 0, dv = 0;
  int64_t conv_floats() const { return conv_rows * conv_dim; }
  int64_t delta_floats() const { return n_v_heads * dk * dv; }
  int64_t floats() const { return conv_floats() + delta_floats(); }
};

// What one layer of the shard keeps per slot: its kind and, for kKv, the F16 values of its
// keys and of its values per position (n_head_kv * head size for grouped-query attention; 0
// and 0 for a layer that reads another layer's rows).
struct CacheLayer {
  LayerCache kind = LayerCache::kKv;
  int64_t k_dim = 0, v_dim = 0;
  bool operator==(const CacheLayer&) const = default;
};

// The shape of a whole cache: each layer of the shard, the slots, and the recurrent state.
struct CacheLayout {
  std::vector<CacheLayer> layers;  // [n_layer of the shard]
  int64_t n_seq = 1;
  int64_t n_ctx = 0;
  RecurrentShape recurrent;  // of every kRecurrent layer
};

// A slot's recurrent states at one position, to restore later (move-only: it can be large).
struct RecurrentSnapshot {
  int64_t pos = 0;          // positions the states had absorbed
  std::vector<float> rows;  // [n_recurrent_layers][RecurrentShape::floats()]
  RecurrentSnapshot() = default;
  RecurrentSnapshot(RecurrentSnapshot&&) = default;
  RecurrentSnapshot& operator=(RecurrentSnapshot&&) = default;
  RecurrentSnapshot(const RecurrentSnapshot&) = delete;
  RecurrentSnapshot& operator=(const RecurrentSnapshot&) = delete;
};

class KvCache {
 public:
  KvCache() = default;
  // n_layer attention layers of this shard alike, n_seq slots of n_ctx positions; k_dim and
  // v_dim values per cell.
  KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim);
  explicit KvCache(const CacheLayout& layout);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t n_layer() const { return static_cast<int64_t>(layers_.size()); }
  int64_t n_seq() const { return n_seq_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t k_dim(int64_t layer) const { return layers_[static_cast<size_t>(layer)].k_dim; }
  int64_t v_dim(int64_t layer) const { return layers_[static_cast<size_t>(layer)].v_dim; }
  LayerCache kind(int64_t layer) const { return layers_[static_cast<size_t>(layer)].kind; }
  const RecurrentShape& recurrent_shape() const { return shape_; }
  bool has_recurrent() const { return n_recurrent_ > 0; }
  size_t bytes() const {
    return (k_.size() + v_.size()) * sizeof(uint16_t) + states_.size() * sizeof(float);
  }
  // The bytes a cache of this shape holds, without making one.
  static size_t bytes_for(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim,
                          int64_t v_dim) {
    return static_cast<size_t>(n_layer * n_seq * n_ctx * (k_dim + v_dim)) * sizeof(uint16_t);
  }
  static size_t bytes_for(const CacheLayout& layout);

  // [k_dim(layer)] F16 keys / [v_dim(layer)] values of (layer, seq, pos). REQUIRES:
  // kind(layer) == kKv.
  uint16_t* k(int64_t layer, int64_t seq, int64_t pos) {
    return k_.data() + offset(layer, seq, pos, k_begin_, &CacheLayer::k_dim);
  }
  uint16_t* v(int64_t layer, int64_t seq, int64_t pos) {
    return v_.data() + offset(layer, seq, pos, v_begin_, &CacheLayer::v_dim);
  }
  const uint16_t* k(int64_t layer, int64_t seq, int64_t pos) const {
    return k_.data() + offset(layer, seq, pos, k_begin_, &CacheLayer::k_dim);
  }
  const uint16_t* v(int64_t layer, int64_t seq, int64_t pos) const {
    return v_.data() + offset(layer, seq, pos, v_begin_, &CacheLayer::v_dim);
  }

  // The conv inputs [conv_rows][conv_dim] and delta states [n_v_heads][dk][dv] of (layer,
  // seq). REQUIRES: kind(layer) == kRecurrent.
  float* conv_state(int64_t layer, int64_t seq) { return state_row(layer, seq); }
  float* delta_state(int64_t layer, int64_t seq) {
    return state_row(layer, seq) + shape_.conv_floats();
  }

  // Positions slot `seq`'s recurrent states have absorbed; -1 after a forward pass that did
  // not finish (the states are then unusable until the slot starts again at 0 or a snapshot
  // is restored).
  int64_t recurrent_pos(int64_t seq) const { return recurrent_pos_[static_cast<size_t>(seq)]; }

  // Before a forward pass of `batch` through the recurrent layers: checks that each slot's
  // tokens come in consecutive positions that start at 0 (its states are zeroed) or at its
  // recurrent_pos, and marks the slots unusable until end_recurrent. Throws herd::Error
  // ("engine") naming the slot otherwise, with nothing changed. No-op without recurrent
  // layers.
  void begin_recurrent(const Batch& batch);
  // After the pass: each slot of the batch has absorbed up to its last token.
  void end_recurrent(const Batch& batch);

  // Copies of a slot's recurrent states and position (snapshot_into reuses `out`'s memory,
  // for checkpoints taken on a hot path), and their restoring into any slot of a cache of
  // the same layout (throws herd::Error when the snapshot's size does not match).
  RecurrentSnapshot snapshot(int64_t seq) const;
  void snapshot_into(int64_t seq, RecurrentSnapshot& out) const;
  void restore(int64_t seq, const RecurrentSnapshot& snapshot);

 private:
  size_t offset(int64_t layer, int64_t seq, int64_t pos, const std::vector<size_t>& begin,
                int64_t CacheLayer::*dim) const {
    const auto l = static_cast<size_t>(layer);
    return begin[l] + static_cast<size_t>((seq * n_ctx_ + pos) * (layers_[l].*dim));
  }
  float* state_row(int64_t layer, int64_t seq) {
    return states_.data() +
           static_cast<size_t>((rec_index_[static_cast<size_t>(layer)] * n_seq_ + seq) *
                               shape_.floats());
  }
  void zero_recurrent(int64_t seq);

  std::vector<CacheLayer> layers_;
  int64_t n_seq_ = 0, n_ctx_ = 0;
  // Per layer the start of its cells in k_ / v_ (a kKv layer's [n_seq][n_ctx][k_dim] and
  // [n_seq][n_ctx][v_dim], row-major) and its index among the recurrent layers (-1 for kKv).
  std::vector<size_t> k_begin_, v_begin_;
  std::vector<int64_t> rec_index_;
  int64_t n_recurrent_ = 0;
  RecurrentShape shape_;
  std::vector<uint16_t> k_, v_;
  // [n_recurrent_layers][n_seq][shape_.floats()]
  std::vector<float> states_;
  std::vector<int64_t> recurrent_pos_;  // [n_seq]
  std::vector<int64_t> next_pos_;       // [n_seq]: begin_recurrent's scratch
};

}  // namespace herd::engine
