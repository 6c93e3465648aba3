#version 450
// Rounds the rows of n_tokens tokens to f16 and stores token t's row at element rows[t] of
// an f16 buffer: a batch's keys or values into the KV cache, each token at its slot and
// position. REQUIRES: n and every rows[t] even (whole 32-bit words).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Src { float src[]; };   // [n_tokens][n]
layout(std430, binding = 1) readonly buffer Rows { uint rows[]; };  // [n_tokens] element offsets
layout(std430, binding = 2) buffer Dst { uint dst[]; };             // f16 pairs
layout(push_constant) uniform Push {
  uint n;
  uint n_tokens;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;  // a pair of one token
  const uint pairs = p.n / 2u;
  if (i >= pairs * p.n_tokens) return;
  const uint t = i / pairs, k = i % pairs;
  const uint at = t * p.n + 2u * k;
  dst[rows[t] / 2u + k] = packHalf2x16(vec2(src[at], src[at + 1u]));
}
