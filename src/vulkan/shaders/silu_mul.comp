#version 450
// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i], for i < n: SwiGLU's
// gated product (engine/ops.h silu_mul). out may be gate's buffer.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  uint n;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  const float g = gate[i];
  out_[i] = g / (1.0 + exp(-g)) * up[i];
}
