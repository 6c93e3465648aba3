#version 450
// The orthonormal Walsh-Hadamard transform of rows in place (engine/compressor.h
// hadamard_transform: Sylvester order, times 1/sqrt(2) per stage), one workgroup per row.
// REQUIRES: n a power of two, n <= 1024.
#include "common.glsl"

layout(std430, binding = 0) buffer X { float x[]; };  // [n_rows][n]
layout(push_constant) uniform Push {
  uint n_rows;
  uint n;
} p;

shared float v[1024];

void main() {
  const uint row = group_index();
  if (row >= p.n_rows) return;
  const uint tid = gl_LocalInvocationID.x;
  for (uint i = tid; i < p.n; i += WG_SIZE) v[i] = x[row * p.n + i];
  barrier();
  float scale = 1.0;
  for (uint h = 1u; h < p.n; h <<= 1) {
    for (uint q = tid; q < p.n / 2u; q += WG_SIZE) {
      const uint j = (q / h) * 2u * h + q % h;
      const float a = v[j], b = v[j + h];
      v[j] = a + b;
      v[j + h] = a - b;
    }
    scale *= 0.70710678118654752;
    barrier();
  }
  for (uint i = tid; i < p.n; i += WG_SIZE) x[row * p.n + i] = v[i] * scale;
}
