#version 450
// Hyper-connections before a sublayer (engine/hyper_connection.h): one workgroup per token
// turns its mixes into the weights pre, post and the Sinkhorn-normalised combination C
// (hc_weights), keeps them in coeffs for hc_post, and collapses the streams into the
// sublayer's input out = sum_i pre_i X_i (hc_collapse). head 1: the output head's weights
// (pre only, hc_head_weights; mixes [n_hc], scale [1], nothing kept).
// REQUIRES: n_hc <= 8.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };          // [n_tokens][n_hc][n_embd]
layout(std430, binding = 1) readonly buffer Mixes { float mixes[]; };  // [n_tokens][n_mixes]
layout(std430, binding = 2) readonly buffer Scale { float scale[]; };  // [3] ([1]: head)
layout(std430, binding = 3) readonly buffer Base { float base[]; };    // [n_mixes]
layout(std430, binding = 4) writeonly buffer Coeffs { float coeffs[]; };  // [n_tokens][n_mixes]
layout(std430, binding = 5) writeonly buffer Out { float out_[]; };    // [n_tokens][n_embd]
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_hc;
  uint n_embd;
  uint sinkhorn_iters;
  float eps;
  uint head;
} p;

shared float w[2 * 8 + 64];  // pre, post, comb

float sigmoid(float v) {
  return 1.0 / (1.0 + exp(-v));
}

void main() {
  const uint t = group_index();
  if (t >= p.n_tokens) return;
  const uint s = p.n_hc;
  const uint n_mixes = p.head != 0u ? s : 2u * s + s * s;
  const uint m0 = t * n_mixes;
  if (gl_LocalInvocationID.x == 0u) {
    for (uint i = 0u; i < s; ++i) w[i] = sigmoid(mixes[m0 + i] * scale[0] + base[i]) + p.eps;
    if (p.head == 0u) {
      for (uint i = 0u; i < s; ++i) {
        w[s + i] = 2.0 * sigmoid(mixes[m0 + s + i] * scale[1] + base[s + i]);
      }
      const uint c0 = 2u * s;
      for (uint i = 0u; i < s * s; ++i) {
        w[c0 + i] = mixes[m0 + c0 + i] * scale[2] + base[c0 + i];
      }
      for (uint r = 0u; r < s; ++r) {  // softmax of each row, + eps
        float mx = w[c0 + r * s];
        for (uint c = 1u; c < s; ++c) mx = max(mx, w[c0 + r * s + c]);
        float sum = 0.0;
        for (uint c = 0u; c < s; ++c) {
          w[c0 + r * s + c] = exp(w[c0 + r * s + c] - mx);
          sum += w[c0 + r * s + c];
        }
        for (uint c = 0u; c < s; ++c) w[c0 + r * s + c] = w[c0 + r * s + c] / sum + p.eps;
      }
      for (uint it = 0u; it < p.sinkhorn_iters; ++it) {
        if (it > 0u) {  // rows, then columns; the first round normalises the columns only
          for (uint r = 0u; r < s; ++r) {
            float sum = p.eps;
            for (uint c = 0u; c < s; ++c) sum += w[c0 + r * s + c];
            for (uint c = 0u; c < s; ++c) w[c0 + r * s + c] /= sum;
          }
        }
        for (uint c = 0u; c < s; ++c) {
          float sum = p.eps;
          for (uint r = 0u; r < s; ++r) sum += w[c0 + r * s + c];
          for (uint r = 0u; r < s; ++r) w[c0 + r * s + c] /= sum;
        }
      }
      for (uint i = 0u; i < n_mixes; ++i) coeffs[m0 + i] = w[i];
    }
  }
  barrier();
  const uint x0 = t * s * p.n_embd;
  for (uint e = gl_LocalInvocationID.x; e < p.n_embd; e += WG_SIZE) {
    float acc = x[x0 + e] * w[0];
    for (uint i = 1u; i < s; ++i) acc += x[x0 + i * p.n_embd + e] * w[i];
    out_[t * p.n_embd + e] = acc;
  }
}
