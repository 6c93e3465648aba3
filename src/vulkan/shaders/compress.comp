#version 450
// Compressed entries of the blocks a batch completes (engine/compressor.h compress_block and
// compressed_finish), one workgroup per block: per channel the softmax over the block's
// scores (CSA, overlap 1: channel c of the previous block's rows and channel head_dim + c of
// its own) weights the kv values; then RMSNorm times norm, the rope of the last n_rot
// values (adjacent pairs) by the block's angles, optionally the Hadamard transform, and the
// entry is stored in F16 at (seq, block).
// REQUIRES: head_dim even, a power of two when hadamard, <= 1024; WG_SIZE a power of two.
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer KvRows { float kv_rows[]; };  // [n_seq n_ctx][width]
layout(std430, binding = 1) readonly buffer ScoreRows { float score_rows[]; };
layout(std430, binding = 2) readonly buffer Blocks { uint blocks[]; };  // [n_blocks][2] seq, block
layout(std430, binding = 3) readonly buffer Norm { float norm[]; };     // [head_dim]
layout(std430, binding = 4) readonly buffer Angles { float angles[]; };  // [n_blocks][n_rot]
layout(std430, binding = 5) buffer Entries { uint entries[]; };  // f16 [n_seq][n_entries][head_dim]
layout(push_constant) uniform Push {
  uint n_blocks;
  uint ratio;
  uint head_dim;
  uint overlap;
  uint n_ctx;
  uint n_entries;
  uint n_rot;
  uint hadamard;
  float eps;
} p;

shared float e[1024];

void main() {
  const uint bi = group_index();
  if (bi >= p.n_blocks) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint seq = blocks[2u * bi], block = blocks[2u * bi + 1u];
  const uint d = p.head_dim, width = p.overlap != 0u ? 2u * d : d;
  const uint first = seq * p.n_ctx + block * p.ratio;  // the block's first row
  const bool previous = p.overlap != 0u && block > 0u;
  float squares = 0.0;
  for (uint c = tid; c < d; c += WG_SIZE) {
    const uint col = p.overlap != 0u ? d + c : c;
    float mx = -1.0 / 0.0;
    if (previous) {
      for (uint j = 0u; j < p.ratio; ++j) {
        mx = max(mx, score_rows[(first - p.ratio + j) * width + c]);
      }
    }
    for (uint j = 0u; j < p.ratio; ++j) mx = max(mx, score_rows[(first + j) * width + col]);
    float sum = 0.0, acc = 0.0;
    if (previous) {
      for (uint j = 0u; j < p.ratio; ++j) {
        const uint r = (first - p.ratio + j) * width + c;
        const float w = exp(score_rows[r] - mx);
        sum += w;
        acc += w * kv_rows[r];
      }
    }
    for (uint j = 0u; j < p.ratio; ++j) {
      const uint r = (first + j) * width + col;
      const float w = exp(score_rows[r] - mx);
      sum += w;
      acc += w * kv_rows[r];
    }
    const float v = acc / sum;
    e[c] = v;
    squares += v * v;
  }
  squares = workgroup_sum(squares);  // its barriers make e visible to every invocation
  const float inv = 1.0 / sqrt(squares / float(d) + p.eps);
  for (uint c = tid; c < d; c += WG_SIZE) e[c] = e[c] * inv * norm[c];
  barrier();
  const uint half_rot = p.n_rot / 2u, rot0 = d - p.n_rot;
  for (uint i = tid; i < half_rot; i += WG_SIZE) {
    const float cs = angles[bi * p.n_rot + i], sn = angles[bi * p.n_rot + half_rot + i];
    const float x0 = e[rot0 + 2u * i], x1 = e[rot0 + 2u * i + 1u];
    e[rot0 + 2u * i] = x0 * cs - x1 * sn;
    e[rot0 + 2u * i + 1u] = x0 * sn + x1 * cs;
  }
  barrier();
  float scale = 1.0;
  if (p.hadamard != 0u) {
    for (uint h = 1u; h < d; h <<= 1) {
      for (uint q = tid; q < d / 2u; q += WG_SIZE) {
        const uint j = (q / h) * 2u * h + q % h;
        const float a = e[j], b = e[j + h];
        e[j] = a + b;
        e[j + h] = a - b;
      }
      scale *= 0.70710678118654752;
      barrier();
    }
  }
  const uint out0 = ((seq * p.n_entries + block) * d) / 2u;
  for (uint k = tid; k < d / 2u; k += WG_SIZE) {
    entries[out0 + k] = packHalf2x16(vec2(e[2u * k] * scale, e[2u * k + 1u] * scale));
  }
}
