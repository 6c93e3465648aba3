#version 450
// Rotary position embedding in place (engine/ops.h rope_apply), one invocation per pair.
// x: [n_tokens][n_head][head_dim]; of each head, the n_rot dimensions from rot_offset on
// rotate. angles: [n_tokens][n_rot]: the n_rot / 2 cosines, then the n_rot / 2 sines of
// the token's position, as rope_angles() computes them on the host (in double precision,
// YaRN and frequency factors included: GPUs' sin and cos are accurate only near zero, and
// angles reach thousands of radians).
// neox 0: adjacent pairs (x0, x1), (x2, x3), ...; 1: halves (x0, x_{n_rot/2}), ...
#include "common.glsl"

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Angles { float angles[]; };
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_head;
  uint head_dim;
  uint n_rot;
  uint rot_offset;
  uint neox;
} p;

void main() {
  const uint half_rot = p.n_rot / 2;
  const uint pair = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (pair >= p.n_tokens * p.n_head * half_rot) return;
  const uint i = pair % half_rot;
  const uint head = pair / half_rot;  // token * n_head + h
  const uint token = head / p.n_head;
  const uint base = head * p.head_dim + p.rot_offset;
  const uint a = base + (p.neox != 0 ? i : 2 * i);
  const uint b = base + (p.neox != 0 ? i + half_rot : 2 * i + 1);
  const float c = angles[token * p.n_rot + i];
  const float s = angles[token * p.n_rot + half_rot + i];
  const float x0 = x[a];
  const float x1 = x[b];
  x[a] = x0 * c - x1 * s;
  x[b] = x0 * s + x1 * c;
}
