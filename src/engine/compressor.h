// The KV compressors of DeepSeek V4's compressed attention: every `ratio` tokens of a sequence
// become one cached entry, a per-channel softmax-weighted sum of the block's rows
//
//   kv_t = compressor_kv . u_t,   s_t = compressor_gate . u_t + ape[t mod ratio]
//   entry_b[c] = sum_t softmax_t(s_t[c]) kv_t[c]            t in block b
//
// HCA (heavily compressed attention, ratio 128) sums the tokens of block b only. CSA
// (compressed sparse attention, ratio 4) overlaps: its rows are twice as wide, and channel c
// of entry b is one softmax over the 2 x ratio values "channel c of block b - 1" and
// "channel head_dim + c of block b" (block -1 absent). The lightning indexer's keys come from
// a compressor of the CSA kind too. An entry is then RMS-normalised (compressor_norm), roped at
// the block's first position and, for the indexer, Hadamard-transformed (compressed_finish).
//
// A sequence's state between blocks is the rows of its last ring_rows() tokens (kv and score),
// row of position p at p mod ring_rows(): a block needs the rows of its own tokens (and the
// previous block's for CSA), nothing older. Block b is complete once token b ratio + ratio - 1
// is seen; a query at position p sees entries b with b ratio + ratio - 1 <= p.
#pragma once

#include <cstdint>

#include "engine/ops.h"

namespace herd::engine {

struct CompressorShape {
  int64_t ratio = 0;     // tokens per entry
  int64_t head_dim = 0;  // values of one entry
  bool overlap = false;  // CSA: an entry also reads the previous block
  int64_t width() const { return overlap ? 2 * head_dim : head_dim; }  // values of a row
  int64_t ring_rows() const { return overlap ? 2 * ratio : ratio; }    // rows a sequence keeps
  // Entries visible to a query at position pos: the blocks complete by then.
  int64_t visible(int64_t pos) const { return (pos + 1) / ratio; }
  bool completes_block(int64_t pos) const { return (pos + 1) % ratio == 0; }
};

// Entry `block` from a sequence's ring of rows.
// kv_ring, score_ring: [ring_rows][width], the row of position p at p % ring_rows (scores with
// the ape added); REQUIRES: the ring holds the rows of every position of block (and, with
// overlap and block > 0, of block - 1). out: [head_dim].
void compress_block(const CompressorShape& s, const float* kv_ring, const float* score_ring,
                    int64_t block, float* out);

// An entry's last steps, in place: RMSNorm times norm [head_dim], rope of the last rope.n_rot
// values (adjacent pairs) at position `pos` (the block's first token), and, when `hadamard`,
// the orthonormal Walsh-Hadamard transform of the whole entry (head_dim a power of two).
void compressed_finish(float* entry, int64_t head_dim, const float* norm, float eps,
                       const Rope& rope, int64_t pos, bool hadamard);

// x <- H x / sqrt(n), H the Sylvester-ordered Hadamard matrix; n a power of two.
void hadamard_transform(float* x, int64_t n);

}  // namespace herd::engine
