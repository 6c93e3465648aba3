#version 450
// DeepSeek V4's attention of one token's heads (engine/compressed_attention.cpp): over its
// sliding window of raw latent rows (positions max(0, pos - window + 1) .. pos of its
// sequence) and then its compressed entries: the ones the indexer chose (indexed), or every
// visible one (ratio > 0), none for ratio 0. Keys are the values (one latent head), F16;
// queries are rounded to F16 as the CPU's; a sink logit per head takes a share of the
// weight and has no value. One workgroup per (token, head), attend.comp's three passes.
// REQUIRES: dim even, <= 1024.
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [n_tokens][n_head][dim]
layout(std430, binding = 1) readonly buffer Raw { uint raw[]; };       // f16 [n_seq][n_ctx][dim]
layout(std430, binding = 2) readonly buffer Entries { uint entries[]; };  // f16 [n_seq][n_entries][dim]
layout(std430, binding = 3) readonly buffer Chosen { uint chosen[]; };  // [n_tokens][top_k]
layout(std430, binding = 4) readonly buffer Sinks { float sinks[]; };   // [n_head]
layout(std430, binding = 5) readonly buffer Tokens { uint tokens[]; };  // [n_tokens][4] seq, pos
layout(std430, binding = 6) coherent buffer Scores { float scores[]; };  // [n_tokens][n_head][key_rows]
layout(std430, binding = 7) writeonly buffer Out { float out_[]; };     // [n_tokens][n_head][dim]
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_head;
  uint dim;
  uint n_ctx;
  uint window;
  uint ratio;
  uint indexed;
  uint top_k;
  uint n_entries;
  uint key_rows;
  float scale;
} p;

shared float q_shared[1024];

uint n_window;
uint first;
uint seq;
uint t;

// The element offset of key j: a window row, or an entry.
uint key_at(uint j) {
  if (j < n_window) return (seq * p.n_ctx + first + j) * p.dim;
  const uint i = j - n_window;
  const uint entry = p.indexed != 0u ? chosen[t * p.top_k + i] : i;
  return (seq * p.n_entries + entry) * p.dim;
}

float key_value(uint j, uint d) {
  const uint e = key_at(j) + d;
  const vec2 v = j < n_window ? unpackHalf2x16(raw[e >> 1]) : unpackHalf2x16(entries[e >> 1]);
  return (e & 1u) != 0u ? v.y : v.x;
}

void main() {
  const uint th = group_index();  // t * n_head + h
  if (th >= p.n_tokens * p.n_head) return;
  const uint h = th % p.n_head;
  t = th / p.n_head;
  seq = tokens[4u * t];
  const uint pos = tokens[4u * t + 1u];
  first = pos + 1u > p.window ? pos + 1u - p.window : 0u;
  n_window = pos + 1u - first;
  const uint visible = p.ratio > 0u ? min((pos + 1u) / p.ratio, p.n_entries) : 0u;
  const uint n_keys = n_window + (p.indexed != 0u ? min(visible, p.top_k) : visible);
  const uint tid = gl_LocalInvocationID.x;
  const uint row = th * p.key_rows;
  for (uint d = tid; d < p.dim; d += WG_SIZE) {
    q_shared[d] = unpackHalf2x16(packHalf2x16(vec2(q[th * p.dim + d], 0.0))).x;
  }
  barrier();

  float m = -1.0 / 0.0;
  for (uint j = tid; j < n_keys; j += WG_SIZE) {
    const uint k = key_at(j) >> 1;
    float dot = 0.0;
    for (uint d = 0u; d < p.dim / 2u; ++d) {
      const vec2 kv = j < n_window ? unpackHalf2x16(raw[k + d]) : unpackHalf2x16(entries[k + d]);
      dot += q_shared[2u * d] * kv.x + q_shared[2u * d + 1u] * kv.y;
    }
    const float s = dot * p.scale;
    scores[row + j] = s;
    m = max(m, s);
  }
  m = max(m, sinks[h]);
  m = workgroup_max(m);

  float sum = 0.0;
  for (uint j = tid; j < n_keys; j += WG_SIZE) {
    const float e = exp(scores[row + j] - m);
    scores[row + j] = e;
    sum += e;
  }
  sum = workgroup_sum(sum);
  sum += exp(sinks[h] - m);
  memoryBarrierBuffer();
  barrier();

  const float inv = 1.0 / sum;
  for (uint d = tid; d < p.dim; d += WG_SIZE) {
    float acc = 0.0;
    for (uint j = 0u; j < n_keys; ++j) acc += scores[row + j] * key_value(j, d);
    out_[th * p.dim + d] = acc * inv;
  }
}
