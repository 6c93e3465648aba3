#version 450
// A batch's compressor rows into the sequences' row stores (engine/compressed_attention.cpp
// run_compressor): kv as computed, the score with the position's ape row added; the row of
// (seq, pos) at seq * n_ctx + pos. One invocation per (token, value).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Kv { float kv[]; };        // [n_tokens][width]
layout(std430, binding = 1) readonly buffer Score { float score[]; };  // [n_tokens][width]
layout(std430, binding = 2) readonly buffer Ape { float ape[]; };      // [ratio][width]
layout(std430, binding = 3) readonly buffer Tokens { uint tokens[]; };  // [n_tokens][4] seq, pos
layout(std430, binding = 4) writeonly buffer KvRows { float kv_rows[]; };  // [n_seq n_ctx][width]
layout(std430, binding = 5) writeonly buffer ScoreRows { float score_rows[]; };
layout(push_constant) uniform Push {
  uint n_tokens;
  uint width;
  uint ratio;
  uint n_ctx;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n_tokens * p.width) return;
  const uint t = i / p.width, c = i % p.width;
  const uint seq = tokens[4u * t], pos = tokens[4u * t + 1u];
  const uint row = (seq * p.n_ctx + pos) * p.width + c;
  kv_rows[row] = kv[i];
  score_rows[row] = score[i] + ape[(pos % p.ratio) * p.width + c];
}
