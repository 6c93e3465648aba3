#version 450
// The gated products of the FFN (engine/ops.h), out[i] = act(gate[i]) * up[i] for i < n:
//   kind 0  silu_mul:       silu(g) * u = g / (1 + e^-g) * u                 (SwiGLU)
//   kind 1  gelu_tanh_mul:  0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u   (GeGLU)
//   kind 2  swiglu_oai_mul: g = min(g, 7), u = clamp(u, -7, 7): g sigmoid(1.702 g) (u + 1)
//   kind 3  silu_clamp_mul: min(silu(g), limit) * clamp(u, -limit, limit)   (DeepSeek V4)
// out may be gate's buffer.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Gate { float gate[]; };
layout(std430, binding = 1) readonly buffer Up { float up[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  uint n;
  uint kind;
  float limit;
} p;

void main() {
  const uint i = group_index() * WG_SIZE + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  float g = gate[i];
  float u = up[i];
  float y;
  if (p.kind == 0u) {
    y = g / (1.0 + exp(-g)) * u;
  } else if (p.kind == 1u) {
    y = 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u;
  } else if (p.kind == 2u) {
    g = min(g, 7.0);
    u = clamp(u, -7.0, 7.0);
    y = g / (1.0 + exp(-1.702 * g)) * (u + 1.0);
  } else {
    y = min(g / (1.0 + exp(-g)), p.limit) * clamp(u, -p.limit, p.limit);
  }
  out_[i] = y;
}
