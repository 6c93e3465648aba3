#version 450
// In-place softmax of each row of x [n_rows][n]: one workgroup per row (engine/ops.h softmax).
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Push {
  uint n;
  uint n_rows;
} p;

void main() {
  const uint row = group_index();
  if (row >= p.n_rows) return;
  const uint base = row * p.n;
  float m = -1.0 / 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG_SIZE) m = max(m, x[base + i]);
  m = workgroup_max(m);
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG_SIZE) {
    const float e = exp(x[base + i] - m);
    x[base + i] = e;
    sum += e;
  }
  const float inv = 1.0 / workgroup_sum(sum);
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG_SIZE) x[base + i] *= inv;
}
