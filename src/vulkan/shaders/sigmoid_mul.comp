#version 450
// x[i] *= sigmoid(gate[i / group]) for i < n: a gate per element (group 1: the gated
// attention output of Qwen3-Next and Qwen3.5) or per row of `group` (the gated shared
// expert's one gate per token).
#include "common.glsl"

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gate { float gate[]; };
layout(push_constant) uniform Push {
  uint n;
  uint group;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  x[i] = x[i] / (1.0 + exp(-gate[i / p.group]));
}
