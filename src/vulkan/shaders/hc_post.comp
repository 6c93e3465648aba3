#version 450
// Hyper-connections after a sublayer (engine/hyper_connection.h hc_expand), in place:
// X_i <- post_i f + sum_j C[j][i] X_j, one invocation per (token, element) over every stream.
// REQUIRES: n_hc <= 8.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer F { float f[]; };            // [n_tokens][n_embd]
layout(std430, binding = 1) readonly buffer Coeffs { float coeffs[]; };  // [n_tokens][n_mixes]
layout(std430, binding = 2) buffer X { float x[]; };                     // [n_tokens][n_hc][n_embd]
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_hc;
  uint n_embd;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n_tokens * p.n_embd) return;
  const uint t = i / p.n_embd, e = i % p.n_embd, s = p.n_hc;
  const uint c = t * (2u * s + s * s);  // pre, post, comb
  const uint x0 = t * s * p.n_embd + e;
  float r[8];
  for (uint j = 0u; j < s; ++j) r[j] = x[x0 + j * p.n_embd];
  const float fe = f[i];
  for (uint k = 0u; k < s; ++k) {
    float sum = fe * coeffs[c + s + k];
    for (uint j = 0u; j < s; ++j) sum += coeffs[c + 2u * s + j * s + k] * r[j];
    x[x0 + k * p.n_embd] = sum;
  }
}
