#version 450
// Rows of a weight matrix by id, as floats: the token embedding's gather (token_embd of any
// type herd reads, in its GGUF layout), out[t][c] = W[ids[t]][c]. One invocation per value:
// the quant types through weights.glsl's unit_dot against a one-hot vector, which is the
// weight itself (d * sc * q - dmin * mn and kin, as the type table's dequantize).
// One variant per weight type, WEIGHT_<TYPE> as matvec.comp.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer W { uint w[]; };         // [rows] GGUF rows
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };     // [n_tokens]
layout(std430, binding = 2) writeonly buffer Out { float out_[]; };  // [n_tokens][cols]
layout(push_constant) uniform Push {
  uint cols;
  uint row_bytes;
  uint n_tokens;
} p;

uint x_base = 0;
uint hot = 0;  // the column asked for
#define X(i) ((i) == hot ? 1.0 : 0.0)
#define GRID_BINDING 3  // the grid types' codebook (weights.glsl)
#include "weights.glsl"

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n_tokens * p.cols) return;
  const uint c = i % p.cols;
  const uint row = ids[i / p.cols];
#if defined(WEIGHT_F32)
  out_[i] = uintBitsToFloat(w[row * p.cols + c]);
#elif defined(WEIGHT_F16) || defined(WEIGHT_BF16)
  const uint e = row * p.cols + c;
  const uint half_bits = (w[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu;
#if defined(WEIGHT_F16)
  out_[i] = unpackHalf2x16(half_bits).x;
#else
  out_[i] = uintBitsToFloat(half_bits << 16);
#endif
#else
  hot = c;
  out_[i] = unit_dot(row * p.row_bytes, c / 32u);
#endif
}
