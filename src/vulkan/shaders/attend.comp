#version 450
// Attention of query heads over the F16 KV cache, as kernels/attention.h's scalar attend:
// out[t][h] = sum_j softmax_j(q[t][h] . k_j * scale) v_j over the positions token t sees:
// pos = pos0 + t, j in [max(0, pos - window + 1), pos] (window 0: [0, pos]), the causal
// mask of a prefill chunk (n_tokens 1: a decode step);
// with an optional sink logit per head (gpt-oss) that takes a share of the weight and has
// no value. Grouped-query: head h reads KV head h / (n_head / n_kv_head). MLA: values are the
// first v_dim of each key row (values bound to the keys' buffer).
// One workgroup per (token, head), three passes: scores (kept in `scores`, global scratch), their
// exponentials and sum, then the weighted sum of values (invocations over dimensions).
// Layout of the caches, in f16 elements: row j of KV head g starts at j * stride +
// g * head_stride (after kv_offset). REQUIRES: k_dim, stride, head_stride and kv_offset even;
// k_dim <= 1024.
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [n_tokens][n_head][k_dim]
layout(std430, binding = 1) readonly buffer K { uint keys[]; };        // f16 pairs
layout(std430, binding = 2) readonly buffer V { uint values[]; };      // f16 pairs
layout(std430, binding = 3) readonly buffer Sinks { float sinks[]; };  // [n_head] if has_sinks
layout(std430, binding = 4) coherent buffer Scores { float scores[]; };  // [n_tokens][n_head][n_pos]
layout(std430, binding = 5) writeonly buffer Out { float out_[]; };   // [n_tokens][n_head][v_dim]
layout(push_constant) uniform Push {
  uint n_head;
  uint n_kv_head;
  uint n_pos;
  uint k_dim;
  uint v_dim;
  uint stride;
  uint head_stride;
  float scale;
  uint has_sinks;
  uint n_tokens;
  uint pos0;    // the position of token 0
  uint window;  // sliding window (0: none)
  // Where this call's rows start, in elements: token 0's queries and output, position 0 of
  // the keys and values (a sequence's slot in a cache of several).
  uint q_offset;
  uint kv_offset;
  uint out_offset;
} p;

shared float q_shared[1024];

void main() {
  const uint th = group_index();  // t * n_head + h
  if (th >= p.n_tokens * p.n_head) return;
  const uint h = th % p.n_head;
  const uint pos = p.pos0 + th / p.n_head;
  const uint first = p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
  const uint end = pos + 1u;
  const uint tid = gl_LocalInvocationID.x;
  const uint kv_base = p.kv_offset + (h / (p.n_head / p.n_kv_head)) * p.head_stride;
  const uint row = th * p.n_pos;
  for (uint d = tid; d < p.k_dim; d += WG_SIZE) q_shared[d] = q[p.q_offset + th * p.k_dim + d];
  barrier();

  float m = -1.0 / 0.0;
  for (uint j = first + tid; j < end; j += WG_SIZE) {
    const uint k = (j * p.stride + kv_base) >> 1;
    float dot = 0.0;
    for (uint d = 0; d < p.k_dim / 2u; ++d) {
      const vec2 kv = unpackHalf2x16(keys[k + d]);
      dot += q_shared[2u * d] * kv.x + q_shared[2u * d + 1u] * kv.y;
    }
    const float s = dot * p.scale;
    scores[row + j] = s;
    m = max(m, s);
  }
  if (p.has_sinks != 0u) m = max(m, sinks[h]);
  m = workgroup_max(m);

  float sum = 0.0;
  for (uint j = first + tid; j < end; j += WG_SIZE) {  // the positions this invocation scored
    const float e = exp(scores[row + j] - m);
    scores[row + j] = e;
    sum += e;
  }
  sum = workgroup_sum(sum);
  if (p.has_sinks != 0u) sum += exp(sinks[h] - m);
  memoryBarrierBuffer();  // every weight written above is seen by every invocation below
  barrier();

  const float inv = 1.0 / sum;
  for (uint d = tid; d < p.v_dim; d += WG_SIZE) {
    float acc = 0.0;
    for (uint j = first; j < end; ++j) {
      const uint e = j * p.stride + kv_base + d;
      const vec2 vv = unpackHalf2x16(values[e >> 1]);
      acc += scores[row + j] * ((e & 1u) != 0u ? vv.y : vv.x);
    }
    out_[p.out_offset + th * p.v_dim + d] = acc * inv;
  }
}
