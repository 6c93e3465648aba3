#version 450
// x[i] *= s, for i < n (Gemma 4's layer output scale on the residual stream).
#include "common.glsl"

layout(std430, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Push {
  uint n;
  float s;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  x[i] *= p.s;
}
