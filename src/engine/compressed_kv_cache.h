// The per-sequence state of DeepSeek V4's attention, as small as the design lets it be:
//   - raw: the latent rows (K = V, one head) of the last `window` positions of every layer;
//     the sliding window is all a query reads uncompressed, so older rows are dropped
//     (row of position p at p mod window);
//   - on compressed layers (ratio > 0): the compressor's ring of its last rows (compressor.h)
//     and the compressed entries, one per `ratio` positions;
//   - on indexed (CSA) layers also the lightning indexer's compressor ring and its keys.
// Rows and entries are F16, as the reference's caches; compressor rings stay F32 (they are
// summed with softmax weights later). Sequences are slots, as in KvCache; a slot that starts
// again at position 0 overwrites its state as it goes (nothing older than a position is read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/compressor.h"

namespace herd::engine {

// One layer of the shard: ratio 0 is sliding-window attention only.
struct CompressedLayerSpec {
  int64_t ratio = 0;
  bool indexed = false;  // CSA: overlapping blocks and a lightning indexer
};

struct CompressedCacheShape {
  int64_t n_seq = 1;
  int64_t n_ctx = 0;        // positions per sequence (entries: ceil(n_ctx / ratio))
  int64_t window = 0;       // raw rows kept per sequence and layer
  int64_t head_dim = 0;     // latent (key and value) size
  int64_t indexer_dim = 0;  // indexer key size
  std::vector<CompressedLayerSpec> layers;
};

// The compressors of a layer: the attention's and, on an indexed layer, the indexer's.
CompressorShape attention_compressor(const CompressedCacheShape& s, const CompressedLayerSpec& l);
CompressorShape indexer_compressor(const CompressedCacheShape& s, const CompressedLayerSpec& l);

class CompressedKvCache {
 public:
  CompressedKvCache() = default;
  explicit CompressedKvCache(const CompressedCacheShape& shape);
  CompressedKvCache(CompressedKvCache&&) = default;
  CompressedKvCache& operator=(CompressedKvCache&&) = default;
  CompressedKvCache(const CompressedKvCache&) = delete;
  CompressedKvCache& operator=(const CompressedKvCache&) = delete;

  // The bytes a cache of this shape holds, without making one (the planner's count).
  static size_t bytes_for(const CompressedCacheShape& shape);
  size_t bytes() const;
  const CompressedCacheShape& shape() const { return shape_; }
  int64_t n_entries(int64_t layer) const;  // entries per sequence of a compressed layer

  // [head_dim] F16 latent of (layer, seq, pos); REQUIRES pos among the last `window`
  // positions written.
  uint16_t* raw(int64_t layer, int64_t seq, int64_t pos);
  // Compressor `which` (0: attention, 1: indexer) of (layer, seq): its ring of kv and of
  // scores, each [ring_rows][width], and its entries, [n_entries][head_dim] F16.
  float* ring_kv(int64_t layer, int64_t seq, int which);
  float* ring_score(int64_t layer, int64_t seq, int which);
  uint16_t* entries(int64_t layer, int64_t seq, int which);

  // Positions slot `seq` has absorbed (set by the forward pass after each batch).
  int64_t length(int64_t seq) const { return lengths_[static_cast<size_t>(seq)]; }
  void set_length(int64_t seq, int64_t n) { lengths_[static_cast<size_t>(seq)] = n; }
  // A slot's state at its length as floats (every layer's window rows, then its compressor
  // rings), and its restoring: what a snapshot must keep to continue the slot there. The
  // compressed entries are not in it: those of the blocks before a position never change.
  size_t state_floats() const;
  void save_state(int64_t seq, float* out) const;  // out: [state_floats()]
  void restore_state(int64_t seq, const float* in, int64_t length);

 private:
  struct Part {  // one compressor of one layer, every sequence
    CompressorShape shape;
    int64_t n_entries = 0;
    std::vector<float> kv, score;   // [n_seq][ring_rows][width]
    std::vector<uint16_t> entries;  // [n_seq][n_entries][head_dim]
  };
  struct LayerState {
    std::vector<uint16_t> raw;  // [n_seq][window][head_dim]
    std::vector<Part> parts;    // none, attention, or attention and indexer
  };
  Part& part(int64_t layer, int which);

  CompressedCacheShape shape_;
  std::vector<LayerState> layers_;
  std::vector<int64_t> lengths_;  // [n_seq]
};

}  // namespace herd::engine
