// DeepSeek's lightning indexer (V3.2 / V4 sparse attention): a few cheap heads score every
// cached compressed entry for a query, and only the best top_k entries join its attention.
//
//   q_I    = indexer.attn_q_b . qr        [n_head][dim], roped (last n_rot), Hadamard per head
//   w      = indexer.proj . u / sqrt(n_head dim)   [n_head]
//   k_I,b  = the indexer compressor's entry b    [dim] (F16 in the cache)
//   score_b = sum_h w_h ReLU(q_I,h . k_I,b)
//
// The products are the caller's (kernels::matmul); these are the per-query parts.
#pragma once

#include <cstdint>

namespace herd::engine {

// scores[b] for b < n_keys. q: [n_head][dim]; w: [n_head]; keys: F16 rows, row b at
// keys + b * dim.
void indexer_scores(const float* q, const float* w, int64_t n_head, int64_t dim,
                    const uint16_t* keys, int64_t n_keys, float* scores);

// The indices of the k largest of scores[0, n) in descending order of score (ties: the lower
// index first), all n of them when n <= k. out: [min(n, k)]; returns min(n, k).
int64_t top_k(const float* scores, int64_t n, int64_t k, int32_t* out);

}  // namespace herd::engine
