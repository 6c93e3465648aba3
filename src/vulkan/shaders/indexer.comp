#version 450
// The lightning indexer's choice for each token (engine/lightning_indexer.h), one workgroup
// per token: over the entries visible at its position (the blocks complete by then),
//   score_b = sum_h w_scale w_h ReLU(q_h . k_b)
// and the indices of the top_k best, best first, the lower index first among equals (all
// of them, in that order, when there are at most top_k). Scores are kept in `scores`.
// REQUIRES: WG_SIZE a power of two.
#include "common.glsl"

const uint kNone = 0xffffffffu;

layout(std430, binding = 0) readonly buffer Q { float q[]; };          // [n_tokens][n_head][dim]
layout(std430, binding = 1) readonly buffer W { float w[]; };          // [n_tokens][n_head]
layout(std430, binding = 2) readonly buffer Keys { uint keys[]; };     // f16 [n_seq][n_entries][dim]
layout(std430, binding = 3) readonly buffer Tokens { uint tokens[]; };  // [n_tokens][4] seq, pos
layout(std430, binding = 4) coherent buffer Scores { float scores[]; };  // [n_tokens][n_entries]
layout(std430, binding = 5) writeonly buffer Chosen { uint chosen[]; };  // [n_tokens][top_k]
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_head;
  uint dim;
  uint n_entries;
  uint ratio;
  uint top_k;
  float w_scale;
} p;

shared float red_v[WG_SIZE];
shared uint red_i[WG_SIZE];

bool better(float va, uint ia, float vb, uint ib) {
  return ia != kNone && (ib == kNone || va > vb || (va == vb && ia < ib));
}

void main() {
  const uint t = group_index();
  if (t >= p.n_tokens) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint seq = tokens[4u * t], pos = tokens[4u * t + 1u];
  const uint visible = min((pos + 1u) / p.ratio, p.n_entries);
  const uint row = t * p.n_entries;
  for (uint b = tid; b < visible; b += WG_SIZE) {
    const uint k0 = ((seq * p.n_entries + b) * p.dim) / 2u;
    float score = 0.0;
    for (uint h = 0u; h < p.n_head; ++h) {
      const uint q0 = (t * p.n_head + h) * p.dim;
      float dot = 0.0;
      for (uint i = 0u; i < p.dim / 2u; ++i) {
        const vec2 k = unpackHalf2x16(keys[k0 + i]);
        dot += q[q0 + 2u * i] * k.x + q[q0 + 2u * i + 1u] * k.y;
      }
      score += w[t * p.n_head + h] * p.w_scale * max(dot, 0.0);
    }
    scores[row + b] = score;
  }
  memoryBarrierBuffer();
  barrier();
  // The best remaining entry, top_k times; a chosen one leaves the race (its score -inf and
  // its index no longer a candidate).
  const uint m = min(visible, p.top_k);
  for (uint i = 0u; i < m; ++i) {
    float bv = 0.0;
    uint bi = kNone;
    for (uint b = tid; b < visible; b += WG_SIZE) {
      const float v = scores[row + b];
      if (v != -1.0 / 0.0 && better(v, b, bv, bi)) {
        bv = v;
        bi = b;
      }
    }
    red_v[tid] = bv;
    red_i[tid] = bi;
    barrier();
    for (uint s = WG_SIZE / 2u; s > 0u; s >>= 1) {
      if (tid < s && better(red_v[tid + s], red_i[tid + s], red_v[tid], red_i[tid])) {
        red_v[tid] = red_v[tid + s];
        red_i[tid] = red_i[tid + s];
      }
      barrier();
    }
    const uint best = red_i[0];
    if (tid == 0u) {
      chosen[t * p.top_k + i] = best;
      scores[row + best] = -1.0 / 0.0;
    }
    memoryBarrierBuffer();
    barrier();
  }
}
