#version 450
// Rounds n floats to f16 and stores them at element `offset` of an f16 buffer: a token's
// keys and values into the KV cache. REQUIRES: n and offset even (whole 32-bit words).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Src { float src[]; };  // [n]
layout(std430, binding = 1) buffer Dst { uint dst[]; };            // f16 pairs
layout(push_constant) uniform Push {
  uint n;
  uint offset;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;  // a pair
  if (2u * i >= p.n) return;
  dst[p.offset / 2u + i] = packHalf2x16(vec2(src[2u * i], src[2u * i + 1u]));
}
