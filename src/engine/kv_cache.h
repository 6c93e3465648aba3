// KV cache: keys and values of every position of every sequence slot, per layer, in F16
// (half the bytes of F32; attention converts on the fly). A slot is one sequence; its
// cells are indexed by position, so a sequence's cache is the prefix [0, length).
// Each layer has its own row widths (Gemma 4's sliding and global layers differ in KV heads
// and head size); a layer that reads another layer's keys and values caches nothing (widths
// 0). Keys and values may differ in size; multi-head latent attention caches one row per
// token (the latent and the rope key) and no values (v_dim 0: attention reads the values
// from the key row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace herd::engine {

// F16 values cached per token by one layer: n_head_kv * head size for grouped-query
// attention.
struct KvLayerDims {
  int64_t k_dim = 0, v_dim = 0;
  bool operator==(const KvLayerDims&) const = default;
};

class KvCache {
 public:
  KvCache() = default;
  // The shard's layers (one entry each), n_seq slots of n_ctx positions.
  KvCache(std::vector<KvLayerDims> layers, int64_t n_seq, int64_t n_ctx);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t n_layer() const { return static_cast<int64_t>(layers_.size()); }
  int64_t n_seq() const { return n_seq_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t k_dim(int64_t layer) const { return layers_[static_cast<size_t>(layer)].k_dim; }
  int64_t v_dim(int64_t layer) const { return layers_[static_cast<size_t>(layer)].v_dim; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }
  // The bytes a cache of this shape holds, without making one.
  static size_t bytes_for(const std::vector<KvLayerDims>& layers, int64_t n_seq, int64_t n_ctx);

  // [k_dim] F16 keys / [v_dim] values of (layer, seq, pos).
  uint16_t* k(int64_t layer, int64_t seq, int64_t pos) {
    return k_.data() + offset(layer, seq, pos, k_begin_, &KvLayerDims::k_dim);
  }
  uint16_t* v(int64_t layer, int64_t seq, int64_t pos) {
    return v_.data() + offset(layer, seq, pos, v_begin_, &KvLayerDims::v_dim);
  }
  const uint16_t* k(int64_t layer, int64_t seq, int64_t pos) const {
    return k_.data() + offset(layer, seq, pos, k_begin_, &KvLayerDims::k_dim);
  }
  const uint16_t* v(int64_t layer, int64_t seq, int64_t pos) const {
    return v_.data() + offset(layer, seq, pos, v_begin_, &KvLayerDims::v_dim);
  }

 private:
  size_t offset(int64_t layer, int64_t seq, int64_t pos, const std::vector<size_t>& begin,
                int64_t KvLayerDims::*dim) const {
    const auto l = static_cast<size_t>(layer);
    return begin[l] + static_cast<size_t>((seq * n_ctx_ + pos) * (layers_[l].*dim));
  }

  std::vector<KvLayerDims> layers_;
  int64_t n_seq_ = 0, n_ctx_ = 0;
  // Layer l's cells start at k_begin_[l] / v_begin_[l]: [n_seq][n_ctx][k_dim] each.
  std::vector<size_t> k_begin_, v_begin_;
  std::vector<uint16_t> k_, v_;
};

}  // namespace herd::engine
