#version 450
// The MoE router on the device, as engine/router.h's Router::route: one workgroup per token
// turns its router logits into the n_used experts it runs through and their weights.
//   gating 0 softmax, 1 sigmoid, 2 sqrt(softplus) (softplus(v) = v for v > 20)
//   selection = probability + bias[e] (DeepSeek's exp_probs_b) when has_bias
//   grouped choice (n_group > 1): a group scores its best two selections; the n_group_used
//   best groups compete, the others' experts cannot be chosen
//   the n_used best selections, best first, lower id first among equals; their weights are
//   the probabilities (without the bias), divided by their sum when norm_weights, times
//   weights_scale.
// REQUIRES: n_expert <= 512, n_group <= 64, n_used <= 64, WG_SIZE a power of two.
#include "common.glsl"

const uint kMaxExpert = 512;
const uint kMaxGroup = 64;
const uint kNone = 0xffffffffu;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };  // [n_tokens][n_expert]
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };      // [n_expert]
layout(std430, binding = 2) writeonly buffer Experts { uint experts[]; };  // [n_tokens][n_used]
layout(std430, binding = 3) writeonly buffer Weights { float weights[]; };  // [n_tokens][n_used]
layout(push_constant) uniform Push {
  uint n_tokens;
  uint n_expert;
  uint n_used;
  uint gating;
  uint has_bias;
  uint norm_weights;
  float weights_scale;
  uint n_group;
  uint n_group_used;
} p;

shared float probs[kMaxExpert];
shared float sel[kMaxExpert];
shared uint taken[kMaxExpert];
shared float group_score[kMaxGroup];
shared uint group_kept[kMaxGroup];
shared float chosen_weight[64];
shared float red_v[WG_SIZE];
shared uint red_i[WG_SIZE];

// (va, ia) is the better candidate than (vb, ib): higher, or equal with the lower id; kNone
// is no candidate.
bool better(float va, uint ia, float vb, uint ib) {
  return ia != kNone && (ib == kNone || va > vb || (va == vb && ia < ib));
}

// The best candidate of the workgroup, its id returned to every invocation.
uint workgroup_best(float v, uint i) {
  const uint tid = gl_LocalInvocationID.x;
  red_v[tid] = v;
  red_i[tid] = i;
  barrier();
  for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
    if (tid < s && better(red_v[tid + s], red_i[tid + s], red_v[tid], red_i[tid])) {
      red_v[tid] = red_v[tid + s];
      red_i[tid] = red_i[tid + s];
    }
    barrier();
  }
  const uint best = red_i[0];
  barrier();
  return best;
}

float workgroup_reduce(float v, bool is_max) {
  const uint tid = gl_LocalInvocationID.x;
  red_v[tid] = v;
  barrier();
  for (uint s = WG_SIZE / 2; s > 0; s >>= 1) {
    if (tid < s) {
      red_v[tid] = is_max ? max(red_v[tid], red_v[tid + s]) : red_v[tid] + red_v[tid + s];
    }
    barrier();
  }
  const float total = red_v[0];
  barrier();
  return total;
}

void main() {
  const uint t = group_index();
  if (t >= p.n_tokens) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint n = p.n_expert;

  // ---- probabilities
  float m = -1.0 / 0.0;
  for (uint e = tid; e < n; e += WG_SIZE) {
    const float v = logits[t * n + e];
    probs[e] = v;
    taken[e] = 0u;
    m = max(m, v);
  }
  if (p.gating == 0u) {
    m = workgroup_reduce(m, true);
    float sum = 0.0;
    for (uint e = tid; e < n; e += WG_SIZE) {
      probs[e] = exp(probs[e] - m);
      sum += probs[e];
    }
    const float inv = 1.0 / workgroup_reduce(sum, false);
    for (uint e = tid; e < n; e += WG_SIZE) probs[e] *= inv;
  } else {
    for (uint e = tid; e < n; e += WG_SIZE) {
      const float v = probs[e];
      probs[e] = p.gating == 1u ? 1.0 / (1.0 + exp(-v)) : sqrt(v > 20.0 ? v : log(1.0 + exp(v)));
    }
  }
  for (uint e = tid; e < n; e += WG_SIZE) sel[e] = probs[e] + (p.has_bias != 0u ? bias[e] : 0.0);
  barrier();

  // ---- grouped choice
  if (p.n_group > 1u && p.n_group_used < p.n_group) {
    const uint per_group = n / p.n_group;
    for (uint g = tid; g < p.n_group; g += WG_SIZE) {
      float best = -1.0 / 0.0, second = best;
      for (uint i = 0; i < per_group; ++i) {
        const float v = sel[g * per_group + i];
        if (v > best) {
          second = best;
          best = v;
        } else if (v > second) {
          second = v;
        }
      }
      group_score[g] = per_group > 1u ? best + second : best;
      group_kept[g] = 0u;
    }
    barrier();
    if (tid == 0u) {
      for (uint k = 0; k < p.n_group_used; ++k) {
        uint best = kNone;
        for (uint g = 0; g < p.n_group; ++g) {
          if (group_kept[g] == 0u &&
              better(group_score[g], g, best == kNone ? 0.0 : group_score[best], best)) {
            best = g;
          }
        }
        group_kept[best] = 1u;
      }
    }
    barrier();
    for (uint e = tid; e < n; e += WG_SIZE) {
      if (group_kept[e / per_group] == 0u) sel[e] = -1.0 / 0.0;
    }
    barrier();
  }

  // ---- the n_used best, one workgroup argmax each
  for (uint j = 0; j < p.n_used; ++j) {
    float v = 0.0;
    uint i = kNone;
    for (uint e = tid; e < n; e += WG_SIZE) {
      if (taken[e] == 0u && better(sel[e], e, v, i)) {
        v = sel[e];
        i = e;
      }
    }
    const uint best = workgroup_best(v, i);
    if (tid == 0u) {
      taken[best] = 1u;
      experts[t * p.n_used + j] = best;
      chosen_weight[j] = probs[best];
    }
    barrier();
  }
  if (tid == 0u) {
    float sum = 0.0;
    for (uint j = 0; j < p.n_used; ++j) sum += chosen_weight[j];
    const float factor = (p.norm_weights != 0u ? 1.0 / sum : 1.0) * p.weights_scale;
    for (uint j = 0; j < p.n_used; ++j) weights[t * p.n_used + j] = chosen_weight[j] * factor;
  }
}
