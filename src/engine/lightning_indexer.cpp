#include "engine/lightning_indexer.h"

#include <algorithm>
#include <string>

#include "quant/float16.h"
#include "util/error.h"

namespace herd::engine {

void indexer_scores(const float* q, const float* w, int64_t n_head, int64_t dim,
                    const uint16_t* keys, int64_t n_keys, float* scores) {
  constexpr int64_t kMaxDim = 512;
  HERD_CHECK_MSG(dim <= kMaxDim, "indexer key size " + std::to_string(dim));
  float k[kMaxDim];
  for (int64_t b = 0; b < n_keys; ++b) {
    const uint16_t* kb = keys + b * dim;
    for (int64_t i = 0; i < dim; ++i) k[i] = fp16_to_fp32(kb[i]);
    float score = 0;
    for (int64_t h = 0; h < n_head; ++h) {
      const float* qh = q + h * dim;
      float dot = 0;
      for (int64_t i = 0; i < dim; ++i) dot += qh[i] * k[i];
      score += w[h] * std::max(dot, 0.0f);
    }
    scores[b] = score;
  }
}

int64_t top_k(const float* scores, int64_t n, int64_t k, int32_t* out) {
  const int64_t m = std::min(n, k);
  // A partial insertion sort: k is small (the indexer keeps 4 .. 2048 of n entries).
  int64_t held = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (held == m && !(scores[i] > scores[out[m - 1]])) continue;
    int64_t j = held < m ? held++ : m - 1;
    while (j > 0 && scores[i] > scores[out[j - 1]]) {
      out[j] = out[j - 1];
      --j;
    }
    out[j] = static_cast<int32_t>(i);
  }
  return m;
}

}  // namespace herd::engine
