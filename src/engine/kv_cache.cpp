#include "engine/kv_cache.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace herd::engine {

namespace {

CacheLayout uniform_layout(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim,
                           int64_t v_dim) {
  CacheLayout layout;
  layout.layers.assign(static_cast<size_t>(n_layer),
                       CacheLayer{.kind = LayerCache::kKv, .k_dim = k_dim, .v_dim = v_dim});
  layout.n_seq = n_seq;
  layout.n_ctx = n_ctx;
  return layout;
}

}  // namespace

KvCache::KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim)
    : KvCache(uniform_layout(n_layer, n_seq, n_ctx, k_dim, v_dim)) {}

KvCache::KvCache(const CacheLayout& layout)
    : layers_(layout.layers), n_seq_(layout.n_seq), n_ctx_(layout.n_ctx), shape_(layout.recurrent) {
  const auto cells = static_cast<size_t>(n_seq_ * n_ctx_);
  size_t k = 0, v = 0;
  for (const CacheLayer& l : layers_) {
    const bool kv = l.kind == LayerCache::kKv;
    k_begin_.push_back(k);
    v_begin_.push_back(v);
    rec_index_.push_back(kv ? -1 : n_recurrent_++);
    if (kv) {
      k += cells * static_cast<size_t>(l.k_dim);
      v += cells * static_cast<size_t>(l.v_dim);
    }
  }
  k_.resize(k);
  v_.resize(v);
  states_.resize(static_cast<size_t>(n_recurrent_ * n_seq_ * shape_.floats()));
  recurrent_pos_.assign(static_cast<size_t>(n_seq_), 0);
  next_pos_.assign(static_cast<size_t>(n_seq_), 0);
}

size_t KvCache::bytes_for(const CacheLayout& layout) {
  size_t values = 0;  // F16 values per position of every kKv layer
  int64_t n_recurrent = 0;
  for (const CacheLayer& l : layout.layers) {
    if (l.kind == LayerCache::kKv) {
      values += static_cast<size_t>(l.k_dim + l.v_dim);
    } else {
      ++n_recurrent;
    }
  }
  return values * static_cast<size_t>(layout.n_seq * layout.n_ctx) * sizeof(uint16_t) +
         static_cast<size_t>(n_recurrent * layout.n_seq * layout.recurrent.floats()) *
             sizeof(float);
}

void KvCache::zero_recurrent(int64_t seq) {
  for (int64_t r = 0; r < n_recurrent_; ++r) {
    float* row = states_.data() + static_cast<size_t>((r * n_seq_ + seq) * shape_.floats());
    std::fill(row, row + shape_.floats(), 0.0f);
  }
}

void KvCache::begin_recurrent(const Batch& batch) {
  if (n_recurrent_ == 0) return;
  const int64_t n = batch.size();
  // Check everything before changing anything: a refused batch leaves every slot as it was.
  // next_pos_[seq]: the position the slot's next token in this batch must have (kUnseen
  // before its first).
  constexpr int64_t kUnseen = -2;
  std::fill(next_pos_.begin(), next_pos_.end(), kUnseen);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t seq = batch.seq[static_cast<size_t>(t)];
    const int32_t pos = batch.pos[static_cast<size_t>(t)];
    HERD_CHECK(seq >= 0 && seq < n_seq_);
    int64_t& next = next_pos_[static_cast<size_t>(seq)];
    const bool first = next == kUnseen;
    const int64_t want = first ? recurrent_pos_[static_cast<size_t>(seq)] : next;
    next = pos + 1;
    if (pos == want || (first && pos == 0)) continue;
    throw Error("engine", "sequence slot " + std::to_string(seq) + ": a token at position " +
                              std::to_string(pos) + " where its recurrent state expects " +
                              (want < 0 ? std::string("a new sequence (position 0)")
                                        : "position " + std::to_string(want)) +
                              "; a recurrent state cannot be cut back (restore a snapshot)");
  }
  for (int64_t t = 0; t < n; ++t) {
    const int32_t seq = batch.seq[static_cast<size_t>(t)];
    if (batch.pos[static_cast<size_t>(t)] == 0) zero_recurrent(seq);
    recurrent_pos_[static_cast<size_t>(seq)] = -1;
  }
}

void KvCache::end_recurrent(const Batch& batch) {
  if (n_recurrent_ == 0) return;
  for (int64_t t = 0; t < batch.size(); ++t) {
    recurrent_pos_[static_cast<size_t>(batch.seq[static_cast<size_t>(t)])] =
        batch.pos[static_cast<size_t>(t)] + 1;
  }
}

RecurrentSnapshot KvCache::snapshot(int64_t seq) const {
  RecurrentSnapshot out;
  snapshot_into(seq, out);
  return out;
}

void KvCache::snapshot_into(int64_t seq, RecurrentSnapshot& out) const {
  HERD_CHECK(seq >= 0 && seq < n_seq_);
  const size_t row = static_cast<size_t>(shape_.floats());
  out.pos = recurrent_pos_[static_cast<size_t>(seq)];
  out.rows.resize(static_cast<size_t>(n_recurrent_) * row);
  for (int64_t r = 0; r < n_recurrent_; ++r) {
    const float* src = states_.data() + static_cast<size_t>(r * n_seq_ + seq) * row;
    std::copy(src, src + row, out.rows.data() + static_cast<size_t>(r) * row);
  }
}

void KvCache::restore(int64_t seq, const RecurrentSnapshot& snapshot) {
  HERD_CHECK(seq >= 0 && seq < n_seq_);
  const size_t row = static_cast<size_t>(shape_.floats());
  if (snapshot.rows.size() != static_cast<size_t>(n_recurrent_) * row) {
    throw Error("engine", "a recurrent snapshot of " + std::to_string(snapshot.rows.size()) +
                              " floats does not fit this cache's " + std::to_string(n_recurrent_) +
                              " layers of " + std::to_string(row) + " per slot");
  }
  for (int64_t r = 0; r < n_recurrent_; ++r) {
    const float* src = snapshot.rows.data() + static_cast<size_t>(r) * row;
    std::copy(src, src + row, states_.data() + static_cast<size_t>(r * n_seq_ + seq) * row);
  }
  recurrent_pos_[static_cast<size_t>(seq)] = snapshot.pos;
}

}  // namespace herd::engine
