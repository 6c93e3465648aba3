#version 450
// dst[r * dst_stride + dst_offset + c] = src[r * src_stride + src_offset + c] for r < n_rows,
// c < width: a strided part of each row (one head's nope or rope part, a latent without its
// rope part) copied to or from a dense block.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push {
  uint n_rows;
  uint width;
  uint src_stride;
  uint src_offset;
  uint dst_stride;
  uint dst_offset;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n_rows * p.width) return;
  const uint r = i / p.width, c = i % p.width;
  dst[r * p.dst_stride + p.dst_offset + c] = src[r * p.src_stride + p.src_offset + c];
}
