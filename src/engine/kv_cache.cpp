#include "engine/kv_cache.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace herd::engine {

KvCache::KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim)
    : KvCache(CacheLayout{std::vector<LayerCache>(static_cast<size_t>(n_layer), LayerCache::kKv),
                          n_seq,
                          n_ctx,
                          k_dim,
                          v_dim,
                          {}}) {}

KvCache::KvCache(const CacheLayout& layout)
    : n_seq_(layout.n_seq),
      n_ctx_(layout.n_ctx),
      k_dim_(layout.k_dim),
      v_dim_(layout.v_dim),
      kinds_(layout.layers),
      shape_(layout.recurrent) {
  int64_t n_kv = 0;
  for (LayerCache kind : kinds_) {
    kv_index_.push_back(kind == LayerCache::kKv ? n_kv++ : -1);
    rec_index_.push_back(kind == LayerCache::kRecurrent ? n_recurrent_++ : -1);
  }
  const size_t cells = static_cast<size_t>(n_kv * n_seq_ * n_ctx_);
  k_.resize(cells * static_cast<size_t>(k_dim_));
  v_.resize(cells * static_cast<size_t>(v_dim_));
  states_.resize(static_cast<size_t>(n_recurrent_ * n_seq_ * shape_.floats()));
  recurrent_pos_.assign(static_cast<size_t>(n_seq_), 0);
  next_pos_.assign(static_cast<size_t>(n_seq_), 0);
}

size_t KvCache::bytes_for(const CacheLayout& layout) {
  int64_t n_kv = 0, n_recurrent = 0;
  for (LayerCache kind : layout.layers) (kind == LayerCache::kKv ? n_kv : n_recurrent) += 1;
  return bytes_for(n_kv, layout.n_seq, layout.n_ctx, layout.k_dim, layout.v_dim) +
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
