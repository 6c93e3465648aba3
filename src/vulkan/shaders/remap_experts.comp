#version 450
// The router's expert ids (global) as indices into the experts a rank holds: ids[i] =
// local[ids[i]], 0xffffffff for an expert held elsewhere (matvec_experts then writes 0 for
// that slot, and the combine adds nothing from it; another rank's all-reduce brings it).
#include "common.glsl"

layout(std430, binding = 0) buffer Ids { uint ids[]; };                // [n] expert ids
layout(std430, binding = 1) readonly buffer Local { uint local_[]; };  // [n_expert]
layout(push_constant) uniform Push {
  uint n;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  ids[i] = local_[ids[i]];
}
