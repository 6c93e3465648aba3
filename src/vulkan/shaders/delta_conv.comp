#version 450
// The causal depthwise convolution of a Gated DeltaNet layer, then SiLU (kernels/delta_net.h
// conv1d_silu), over one run of consecutive tokens of one sequence: one invocation per
// channel c walks the run's tokens,
//   out[t][c] = silu(sum_j weight[j][c] * in_{t - kernel + 1 + j}[c]),
// the inputs before the run coming from the slot's state (its last kernel - 1 inputs, oldest
// first; zeros where `fresh`: the sequence starts here), which is left holding the run's
// last kernel - 1 inputs. x, out: [n_tokens][channels] from x_offset, out_offset;
// weight: [kernel][channels]; state: [kernel - 1][channels] from state_offset.
#include "common.glsl"

#define MAX_KERNEL 16

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) buffer State { float state[]; };
layout(std430, binding = 3) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  uint n_tokens;
  uint channels;
  uint kernel;
  uint x_offset;
  uint out_offset;
  uint state_offset;
  uint fresh;
} p;

void main() {
  const uint c = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (c >= p.channels) return;
  const uint n_hist = p.kernel - 1;
  float hist[MAX_KERNEL];  // the last n_hist inputs, oldest first
  for (uint j = 0; j < n_hist; ++j) {
    hist[j] = p.fresh != 0u ? 0.0 : state[p.state_offset + j * p.channels + c];
  }
  for (uint t = 0; t < p.n_tokens; ++t) {
    const float xt = x[p.x_offset + t * p.channels + c];
    float acc = 0.0;
    for (uint j = 0; j < n_hist; ++j) acc += weight[j * p.channels + c] * hist[j];
    acc += weight[n_hist * p.channels + c] * xt;
    out_[p.out_offset + t * p.channels + c] = acc / (1.0 + exp(-acc));
    for (uint j = 0; j + 1 < n_hist; ++j) hist[j] = hist[j + 1];
    if (n_hist > 0) hist[n_hist - 1] = xt;
  }
  for (uint j = 0; j < n_hist; ++j) state[p.state_offset + j * p.channels + c] = hist[j];
}
