// KV cache: keys and values of every position of every sequence slot, per layer, in F16
// (half the bytes of F32; attention converts on the fly). A slot is one sequence; its
// cells are indexed by position, so a sequence's cache is the prefix [0, length).
// Keys and values may differ in size; multi-head latent attention caches one row per
// token (the latent and the rope key) and no values (v_dim 0: attention reads the values
// from the key row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace herd::engine {

class KvCache {
 public:
  KvCache() = default;
  // n_layer layers of this shard, n_seq slots of n_ctx positions; k_dim and v_dim values per
  // cell (n_head_kv * head size for grouped-query attention).
  KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t n_layer() const { return n_layer_; }
  int64_t n_seq() const { return n_seq_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t k_dim() const { return k_dim_; }
  int64_t v_dim() const { return v_dim_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }
  // The bytes a cache of this shape holds, without making one.
  static size_t bytes_for(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim,
                          int64_t v_dim) {
    return static_cast<size_t>(n_layer * n_seq * n_ctx * (k_dim + v_dim)) * sizeof(uint16_t);
  }

  // [k_dim] F16 keys / [v_dim] values of (layer, seq, pos).
  uint16_t* k(int64_t layer, int64_t seq, int64_t pos) {
    return k_.data() + cell(layer, seq, pos) * k_dim_;
  }
  uint16_t* v(int64_t layer, int64_t seq, int64_t pos) {
    return v_.data() + cell(layer, seq, pos) * v_dim_;
  }
  const uint16_t* k(int64_t layer, int64_t seq, int64_t pos) const {
    return k_.data() + cell(layer, seq, pos) * k_dim_;
  }
  const uint16_t* v(int64_t layer, int64_t seq, int64_t pos) const {
    return v_.data() + cell(layer, seq, pos) * v_dim_;
  }

 private:
  size_t cell(int64_t layer, int64_t seq, int64_t pos) const {
    return static_cast<size_t>((layer * n_seq_ + seq) * n_ctx_ + pos);
  }

  int64_t n_layer_ = 0, n_seq_ = 0, n_ctx_ = 0, k_dim_ = 0, v_dim_ = 0;
  // [n_layer][n_seq][n_ctx][k_dim] and [n_layer][n_seq][n_ctx][v_dim], row-major
  std::vector<uint16_t> k_, v_;
};

}  // namespace herd::engine
