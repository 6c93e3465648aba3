#version 450
// Matrix-vector product for decode: y[t][r] = sum_c W[r][c] * x[t][c] for a few tokens t,
// W in its GGUF layout as
// uploaded (quant/blocks.h), x and y floats. Weights are dequantized in registers and
// multiplied with f32 activations (no activation rounding, unlike the CPU's Q8 kernels).
// One workgroup computes NUM_ROWS rows; its invocations stride over a row's 32-weight units
// (a legacy block, or an eighth of a K-quant super-block), so neighbouring invocations read
// neighbouring bytes, each weight byte read once; the x values of a unit are shared by the
// NUM_ROWS rows. Then one workgroup_sum per row.
// One variant per weight type, WEIGHT_<TYPE>: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S; WITH_IDS: the experts of an MoE layer,
// chosen per token by the router's ids (push constants below).
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 2) const uint NUM_ROWS = 2;

layout(std430, binding = 0) readonly buffer W { uint w[]; };  // the rows' bytes, as words
layout(std430, binding = 1) readonly buffer X { float x[]; };  // [n_tokens][cols]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [n_tokens][rows]
#ifdef WITH_IDS
layout(std430, binding = 3) readonly buffer Ids { uint ids[]; };  // [n_tokens][n_used]
#endif
layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint row_bytes;  // bytes of one row in W
  uint n_tokens;
  // WITH_IDS (the experts of an MoE layer): W is [n_expert] matrices of expert_bytes each;
  // slot j of token t multiplies expert ids[t][j] with x[t] (x_per_slot: x[t][j]) into
  // y[t][j]. Unused otherwise.
  uint n_used;
  uint expert_bytes;
  uint x_per_slot;
} p;

uint x_base = 0;  // the token's first element in x

#define X(i) x[i]
#ifdef WITH_IDS
#define GRID_BINDING 4  // the grid types' codebook (weights.glsl)
#else
#define GRID_BINDING 3
#endif
#include "weights.glsl"

void main() {
  const uint first = group_index() * NUM_ROWS;
  if (first >= p.rows) return;  // the whole workgroup
  const uint tid = gl_LocalInvocationID.x;
  // Tokens one after the other, each over the same rows: their bytes come from the cache
  // after the first token (a batch of decode tokens; prefill wants a tiled matrix product).
#ifdef WITH_IDS
  const uint n_slots = p.n_tokens * p.n_used;
#else
  const uint n_slots = p.n_tokens;
#endif
  for (uint t = 0; t < n_slots; ++t) {
#ifdef WITH_IDS
    // An expert this rank does not hold (Kernels::remap_experts): the slot's product is 0.
    if (ids[t] == 0xffffffffu) {
      for (uint r = tid; r < NUM_ROWS; r += WG_SIZE) {
        if (first + r < p.rows) y[t * p.rows + first + r] = 0.0;
      }
      continue;
    }
    const uint w_base = ids[t] * p.expert_bytes;  // the slot's expert, in bytes
    x_base = (p.x_per_slot != 0u ? t : t / p.n_used) * p.cols;
#else
    const uint w_base = 0u;
    x_base = t * p.cols;
#endif
    float sums[NUM_ROWS];
    for (uint r = 0; r < NUM_ROWS; ++r) sums[r] = 0.0;

#if defined(WEIGHT_F32)
    for (uint c = tid; c < p.cols; c += WG_SIZE) {
      const float xv = x[x_base + c];
      for (uint r = 0; r < NUM_ROWS; ++r) {
        if (first + r < p.rows) {
          sums[r] += uintBitsToFloat(w[w_base / 4u + (first + r) * p.cols + c]) * xv;
        }
      }
    }
#elif defined(WEIGHT_F16) || defined(WEIGHT_BF16)
    // Each word holds two weights; a row of odd length starts mid-word, so the words are
    // walked by their global index and each half kept if it belongs to the row.
    for (uint r = 0; r < NUM_ROWS; ++r) {
      if (first + r >= p.rows) break;
      const uint e0 = w_base / 2u + (first + r) * p.cols;  // the row's first element
      const uint w_end = (e0 + p.cols + 1u) >> 1;
      for (uint wi = (e0 >> 1) + tid; wi < w_end; wi += WG_SIZE) {
#if defined(WEIGHT_F16)
        const vec2 v = unpackHalf2x16(w[wi]);
#else
        const vec2 v = vec2(uintBitsToFloat(w[wi] << 16), uintBitsToFloat(w[wi] & 0xffff0000u));
#endif
        const int c = int(2u * wi) - int(e0);  // the column of the low half
        if (c >= 0) sums[r] += v.x * x[x_base + uint(c)];
        if (c + 1 < int(p.cols)) sums[r] += v.y * x[x_base + uint(c + 1)];
      }
    }
#else
    const uint n_units = p.cols / 32u;
    for (uint u = tid; u < n_units; u += WG_SIZE) {
      for (uint r = 0; r < NUM_ROWS; ++r) {
        if (first + r < p.rows) sums[r] += unit_dot(w_base + (first + r) * p.row_bytes, u);
      }
    }
#endif

    for (uint r = 0; r < NUM_ROWS; ++r) {
      const float total = workgroup_sum(sums[r]);
      if (tid == 0 && first + r < p.rows) y[t * p.rows + first + r] = total;
    }
  }
}
