#version 450
// The MoE layer's sum over its experts: out[t][c] = sum_j weights[t][j] * y[t][j][c]
// (weights as the router gave them, y as matvec_experts wrote them). One invocation per
// output value.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Y { float y[]; };              // [n_tokens][n_used][n]
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };  // [n_tokens][n_used]
layout(std430, binding = 2) writeonly buffer Out { float out_[]; };        // [n_tokens][n]
layout(push_constant) uniform Push {
  uint n;
  uint n_used;
  uint n_tokens;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n_tokens * p.n) return;
  const uint t = i / p.n, c = i % p.n;
  float sum = 0.0;
  for (uint j = 0; j < p.n_used; ++j) {
    sum += weights[t * p.n_used + j] * y[(t * p.n_used + j) * p.n + c];
  }
  out_[i] = sum;
}
