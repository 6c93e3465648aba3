#version 450
// x[r][i] += bias[i] for every row r < n_rows (a projection's bias over a batch of tokens);
// with WITH_IDS, x[r][i] += bias[ids[r]][i]: an expert's own bias on the slot it serves.
#include "common.glsl"

layout(std430, binding = 0) buffer X { float x[]; };                // [n_rows][n]
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };  // [n] (or [n_expert][n])
#ifdef WITH_IDS
layout(std430, binding = 2) readonly buffer Ids { uint ids[]; };  // [n_rows] expert ids
#endif
layout(push_constant) uniform Push {
  uint n;
  uint n_rows;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n * p.n_rows) return;
  const uint r = i / p.n, c = i % p.n;
#ifdef WITH_IDS
  if (ids[r] == 0xffffffffu) return;  // an expert this rank does not hold
  x[i] += bias[ids[r] * p.n + c];
#else
  x[i] += bias[c];
#endif
}
