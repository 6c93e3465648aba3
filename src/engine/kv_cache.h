// KV cache: keys and values of every position of every sequence slot, per layer, in F16
// (half the bytes of F32; attention converts on the fly). A slot is one sequence; its
// cells are indexed by position, so a sequence's cache is the prefix [0, length).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace herd::engine {

class KvCache {
 public:
  KvCache() = default;
  // n_layer layers of this shard, n_seq slots of n_ctx positions, kv_dim = n_head_kv * head_dim.
  KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t kv_dim);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t n_seq() const { return n_seq_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }

  // [kv_dim] F16 keys / values of (layer, seq, pos).
  uint16_t* k(int64_t layer, int64_t seq, int64_t pos) {
    return k_.data() + offset(layer, seq, pos);
  }
  uint16_t* v(int64_t layer, int64_t seq, int64_t pos) {
    return v_.data() + offset(layer, seq, pos);
  }
  const uint16_t* k(int64_t layer, int64_t seq, int64_t pos) const {
    return k_.data() + offset(layer, seq, pos);
  }
  const uint16_t* v(int64_t layer, int64_t seq, int64_t pos) const {
    return v_.data() + offset(layer, seq, pos);
  }

 private:
  size_t offset(int64_t layer, int64_t seq, int64_t pos) const {
    return static_cast<size_t>(((layer * n_seq_ + seq) * n_ctx_ + pos) * kv_dim_);
  }

  int64_t n_layer_ = 0, n_seq_ = 0, n_ctx_ = 0, kv_dim_ = 0;
  // [n_layer][n_seq][n_ctx][kv_dim], row-major
  std::vector<uint16_t> k_, v_;
};

}  // namespace herd::engine
