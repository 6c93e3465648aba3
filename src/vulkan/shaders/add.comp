#version 450
// out[i] = a[i] + b[i], for i < n (the residual adds). out may be a's or b's buffer.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  uint n;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  out_[i] = a[i] + b[i];
}
