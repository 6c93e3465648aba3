#version 450
// out[r][i] = x[r][i] / rms(x[r]) * weight[i]: one workgroup per row r (engine/ops.h rms_norm).
// x, out: [n_rows][n]; weight: [n]. out may be x's buffer.
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  uint n;
  uint n_rows;
  float eps;
} p;

void main() {
  const uint row = group_index();
  if (row >= p.n_rows) return;  // the whole workgroup: no barrier is skipped by part of it
  const uint base = row * p.n;
  float sum = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG_SIZE) sum += x[base + i] * x[base + i];
  sum = workgroup_sum(sum);
  const float scale = inversesqrt(sum / float(p.n) + p.eps);
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG_SIZE) {
    out_[base + i] = x[base + i] * scale * weight[i];
  }
}
