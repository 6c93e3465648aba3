#version 450
// Matrix-matrix product for prefill and batched decode: y[t][r] = sum_c W[r][c] * x[t][c],
// W in its GGUF layout as uploaded (quant/blocks.h), x and y floats. A workgroup computes a
// tile of BM rows x BN tokens; per step of BK = 32 columns (one 32-weight unit) it
// dequantizes the tile's weights once into shared memory (weights.glsl's unit_weights, the
// same decoding as matvec) and loads the tokens' activations beside them, and every weight
// there serves the tile's BN tokens: the weights are read once per BN tokens, not once per
// token as matvec does. Each invocation accumulates TM x TN outputs in registers (f32).
// No reduction across invocations: one variant per weight type, WEIGHT_<TYPE> as matvec.comp.
// WITH_IDS: the experts of an MoE layer (matvec.comp's WITH_IDS contract): a workgroup takes
// one expert and one tile of rows, gathers the slots whose id names that expert, and
// computes them in tiles of BN slots; experts no slot chose cost a scan of the ids.
#include "common.glsl"

// Tokens per tile: 32, or 8 or 16 for a batch of a few (the host's choice), so that a
// small batch does not compute a whole tile of zeros.
layout(constant_id = 2) const uint BN = 32u;
const uint BM = 64u, BK = 32u;
const uint kRowLanes = 16u, kTokenLanes = 8u;  // WG_SIZE must be their product, 128
const uint TM = BM / kRowLanes, TN = BN / kTokenLanes;

layout(std430, binding = 0) readonly buffer W { uint w[]; };    // the rows' bytes, as words
layout(std430, binding = 1) readonly buffer Xs { float x[]; };  // [n_tokens][cols]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };  // [n_tokens][rows]
#ifdef WITH_IDS
layout(std430, binding = 3) readonly buffer Ids { uint ids[]; };  // [n_tokens][n_used]
#endif
layout(push_constant) uniform Push {
  uint rows;
  uint cols;
  uint row_bytes;   // bytes of one row in W
  uint n_tokens;
  uint row_tiles;   // ceil(rows / BM): tiles are laid out rows first
  // WITH_IDS: W is [n_expert] matrices of expert_bytes each; slot j of token t multiplies
  // expert ids[t][j] with x[t] (x_per_slot: x[t][j]) into y[t][j]. Unused otherwise.
  uint n_used;
  uint expert_bytes;
  uint x_per_slot;
} p;

// 8 KiB + at most 4.1 KiB: within the 16 KiB every Vulkan device offers. The x tile is
// padded so that its transposed stores hit different banks.
shared float ws[BK * BM];         // [k][row of the tile]
shared float xs[BK * (BN + 1u)];  // [k][token of the tile]
#ifdef WITH_IDS
// The expert's slots found in a window of kWindow slots of ids (2 KiB more).
const uint kWindow = 512u;
shared uint slot_list[kWindow];
shared uint n_found;
#endif

uint x_base = 0;  // weights.glsl's unit_dot is not used here
#define X(i) 0.0
uint unit_row = 0;  // the tile row unit_weights writes
#define UNIT_OUT(i, value) ws[(i) * BM + unit_row] = (value)
#include "weights.glsl"

// Token j < n_valid of the tile: its row of x and of y.
#ifdef WITH_IDS
uint first_slot = 0;  // in slot_list
uint y_row(uint j) { return slot_list[first_slot + j]; }
uint x_row(uint j) { return p.x_per_slot != 0u ? y_row(j) : y_row(j) / p.n_used; }
#else
uint tok0 = 0;
uint y_row(uint j) { return tok0 + j; }
uint x_row(uint j) { return tok0 + j; }
#endif

// Rows row0 .. row0 + BM of the matrix at byte w_base, times the tile's n_valid tokens.
void tile(uint row0, uint w_base, uint n_valid) {
  const uint tid = gl_LocalInvocationID.x;
  const uint lane_row = tid % kRowLanes, lane_tok = tid / kRowLanes;
  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i) {
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;
  }

  for (uint k0 = 0; k0 < p.cols; k0 += BK) {
    // The weight tile [BK][BM]. Quant types: the first BM invocations each dequantize one
    // row's unit, the others meanwhile load the activations. Float types: every
    // invocation, element by element along the rows (columns past cols are zeros: float
    // rows have any length).
#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_BF16)
    for (uint e = tid; e < BK * BM; e += WG_SIZE) {
      const uint r = e / BK, c = e % BK;
      float v = 0.0;
      if (row0 + r < p.rows && k0 + c < p.cols) {
#if defined(WEIGHT_F32)
        v = uintBitsToFloat(w[w_base / 4u + (row0 + r) * p.cols + k0 + c]);
#else
        const uint e2 = w_base / 2u + (row0 + r) * p.cols + k0 + c;  // in halves
        const uint half_bits = (w[e2 >> 1] >> ((e2 & 1u) * 16u)) & 0xffffu;
#if defined(WEIGHT_F16)
        v = unpackHalf2x16(half_bits).x;
#else
        v = uintBitsToFloat(half_bits << 16);
#endif
#endif
      }
      ws[c * BM + r] = v;
    }
    const uint x_first = tid, x_step = WG_SIZE;
#else
    if (tid < BM) {
      unit_row = tid;
      if (row0 + tid < p.rows) {
        unit_weights(w_base + (row0 + tid) * p.row_bytes, k0 / 32u);
      } else {
        for (uint i = 0; i < BK; ++i) ws[i * BM + tid] = 0.0;
      }
    }
    const uint x_first = tid - BM, x_step = WG_SIZE - BM;  // tid < BM: wraps, loads nothing
#endif
    // The activation tile [BK][BN], read along the tokens' rows; tokens past n_valid and
    // columns past cols are zeros.
    for (uint e = x_first; e < BK * BN; e += x_step) {
      const uint t = e / BK, c = e % BK;
      float v = 0.0;
      if (t < n_valid && k0 + c < p.cols) v = x[x_row(t) * p.cols + k0 + c];
      xs[c * (BN + 1u) + t] = v;
    }
    barrier();

    // Rows lane_row + kRowLanes i and tokens lane_tok + kTokenLanes j: neighbouring
    // invocations read neighbouring words of ws, and the same word of xs.
    for (uint k = 0; k < BK; ++k) {
      float a[TM], b[TN];
      for (uint i = 0; i < TM; ++i) a[i] = ws[k * BM + lane_row + kRowLanes * i];
      for (uint j = 0; j < TN; ++j) b[j] = xs[k * (BN + 1u) + lane_tok + kTokenLanes * j];
      for (uint i = 0; i < TM; ++i) {
        for (uint j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    barrier();
  }

  for (uint j = 0; j < TN; ++j) {
    const uint t = lane_tok + kTokenLanes * j;
    if (t >= n_valid) break;
    for (uint i = 0; i < TM; ++i) {
      const uint r = row0 + lane_row + kRowLanes * i;
      if (r < p.rows) y[y_row(t) * p.rows + r] = acc[i][j];
    }
  }
}

void main() {
  const uint group = group_index();
  const uint row0 = (group % p.row_tiles) * BM;
#ifdef WITH_IDS
  const uint expert = group / p.row_tiles;
  const uint n_slots = p.n_tokens * p.n_used;
  for (uint window = 0; window < n_slots; window += kWindow) {
    if (gl_LocalInvocationID.x == 0u) n_found = 0u;
    barrier();
    // In any order: each slot's outputs are computed alike wherever it lands in the list.
    const uint end = min(window + kWindow, n_slots);
    for (uint s = window + gl_LocalInvocationID.x; s < end; s += WG_SIZE) {
      if (ids[s] == expert) slot_list[atomicAdd(n_found, 1u)] = s;
    }
    barrier();
    const uint found = n_found;
    for (first_slot = 0; first_slot < found; first_slot += BN) {
      tile(row0, expert * p.expert_bytes, min(BN, found - first_slot));
    }
    barrier();  // every invocation has read n_found before the next window resets it
  }
#else
  tok0 = (group / p.row_tiles) * BN;
  if (tok0 < p.n_tokens) tile(row0, 0u, min(BN, p.n_tokens - tok0));
#endif
}
