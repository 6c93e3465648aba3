#version 450
// A hash-routed MoE layer's experts (engine/router.h Router::route with fixed ids): token t's
// experts are row tokens[t] of the layer's table; their weights are the gating of their
// router logits (0 softmax over every expert, 1 sigmoid, 2 sqrt(softplus), softplus(v) = v
// for v > 20), divided by their sum when norm_weights, times weights_scale. One invocation
// per token. REQUIRES: n_used <= 64.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };  // [n_tokens][n_expert]
layout(std430, binding = 1) readonly buffer Table { int table[]; };      // [n_vocab][n_used]
layout(std430, binding = 2) readonly buffer Tokens { uint tokens[]; };   // [n_tokens][4]: [2] id
layout(std430, binding = 3) writeonly buffer Experts { uint experts[]; };  // [n_tokens][n_used]
layout(std430, binding = 4) writeonly buffer Weights { float weights[]; };  // [n_tokens][n_used]
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_expert;
  uint n_used;
  uint gating;
  uint norm_weights;
  float weights_scale;
} p;

void main() {
  const uint t = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (t >= p.n_tokens) return;
  const uint l0 = t * p.n_expert;
  float mx = logits[l0], total = 0.0;
  if (p.gating == 0u) {
    for (uint e = 1u; e < p.n_expert; ++e) mx = max(mx, logits[l0 + e]);
    for (uint e = 0u; e < p.n_expert; ++e) total += exp(logits[l0 + e] - mx);
  }
  const uint row = tokens[4u * t + 2u] * p.n_used;
  float w[64];
  float sum = 0.0;
  for (uint j = 0u; j < p.n_used; ++j) {
    const uint e = uint(table[row + j]);
    const float v = logits[l0 + e];
    if (p.gating == 0u) {
      w[j] = exp(v - mx) / total;
    } else if (p.gating == 1u) {
      w[j] = 1.0 / (1.0 + exp(-v));
    } else {
      w[j] = sqrt(v > 20.0 ? v : log(1.0 + exp(v)));
    }
    experts[t * p.n_used + j] = e;
    sum += w[j];
  }
  const float factor = (p.norm_weights != 0u ? 1.0 / sum : 1.0) * p.weights_scale;
  for (uint j = 0u; j < p.n_used; ++j) weights[t * p.n_used + j] = w[j] * factor;
}
