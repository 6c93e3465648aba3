#include "engine/compressor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "util/error.h"

namespace herd::engine {

void compress_block(const CompressorShape& s, const float* kv_ring, const float* score_ring,
                    int64_t block, float* out) {
  const int64_t ring = s.ring_rows(), width = s.width(), d = s.head_dim;
  const int64_t first = block * s.ratio;
  const bool previous = s.overlap && block > 0;
  auto row = [&](int64_t pos) { return (pos % ring) * width; };
  for (int64_t c = 0; c < d; ++c) {
    // Sources of channel c: (position, column) pairs; one pass for the max, one for the sum.
    float mx = -std::numeric_limits<float>::infinity();
    if (previous) {
      for (int64_t j = 0; j < s.ratio; ++j)
        mx = std::max(mx, score_ring[row(first - s.ratio + j) + c]);
    }
    const int64_t col = s.overlap ? d + c : c;
    for (int64_t j = 0; j < s.ratio; ++j) mx = std::max(mx, score_ring[row(first + j) + col]);
    float sum = 0, acc = 0;
    if (previous) {
      for (int64_t j = 0; j < s.ratio; ++j) {
        const int64_t r = row(first - s.ratio + j) + c;
        const float w = std::exp(score_ring[r] - mx);
        sum += w;
        acc += w * kv_ring[r];
      }
    }
    for (int64_t j = 0; j < s.ratio; ++j) {
      const int64_t r = row(first + j) + col;
      const float w = std::exp(score_ring[r] - mx);
      sum += w;
      acc += w * kv_ring[r];
    }
    out[c] = acc / sum;
  }
}

void hadamard_transform(float* x, int64_t n) {
  HERD_CHECK_MSG(n > 0 && (n & (n - 1)) == 0, "n=" + std::to_string(n));
  float scale = 1;
  for (int64_t h = 1; h < n; h <<= 1) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
    scale *= 0.70710678118654752f;
  }
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void compressed_finish(float* entry, int64_t head_dim, const float* norm, float eps,
                       const Rope& rope, int64_t pos, bool hadamard) {
  constexpr int64_t kMaxRot = 512;
  HERD_CHECK(rope.n_rot <= head_dim && rope.n_rot <= kMaxRot);
  rms_norm(entry, norm, head_dim, eps, entry);
  float cos[kMaxRot / 2], sin[kMaxRot / 2];
  rope_angles(rope, pos, cos, sin);
  rope_apply(entry + head_dim - rope.n_rot, rope.n_rot, RopeStyle::kAdjacentPairs, cos, sin);
  if (hadamard) hadamard_transform(entry, head_dim);
}

}  // namespace herd::engine
