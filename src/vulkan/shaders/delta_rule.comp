#version 450
// The gated delta rule of a Gated DeltaNet layer (engine/delta_net.h, kernels/delta_net.h's
// recurrence) over one run of consecutive tokens of one sequence: one workgroup per V head j,
// which reads K head kh (tiled: j % n_k; else j / (n_v / n_k)). Per token t:
//   q, k = L2-normalized (eps) rows of the conv output; v its V head's row
//   beta = sigmoid(b[t][j]); decay = exp(softplus(alpha[t][j] + dt_bias[j]) * a[j])
//   S <- decay S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q * scale
//   out[t][j] = RMSNorm(o) * norm * silu(z[t][j])
// S: the head's [dk][dv] state (row-major) from state_offset + j * dk * dv, updated in
// place (zeros first where `fresh`). Invocation i owns columns i, i + WG_SIZE, ... of S, so
// no two touch the same state. conv: [n][conv_dim] rows [q | k | v]; b, alpha at
// row * stride + offset + j; z, out: [n][n_v * dv]; every row from token t0.
#include "common.glsl"
#include "reduce.glsl"

#define MAX_HEAD 256
#define MAX_COLUMNS 8  // of one invocation: dv <= MAX_COLUMNS * WG_SIZE

layout(std430, binding = 0) readonly buffer Conv { float conv[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer Alpha { float alpha[]; };
layout(std430, binding = 3) readonly buffer Z { float z[]; };
layout(std430, binding = 4) readonly buffer DtBias { float dt_bias[]; };
layout(std430, binding = 5) readonly buffer A { float a[]; };
layout(std430, binding = 6) readonly buffer Norm { float norm[]; };
layout(std430, binding = 7) buffer State { float state[]; };
layout(std430, binding = 8) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  uint n_tokens;
  uint t0;
  uint dk;
  uint dv;
  uint n_k;
  uint n_v;
  uint tiled;
  uint b_stride;
  uint b_offset;
  uint alpha_stride;
  uint alpha_offset;
  uint state_offset;
  uint fresh;
  float scale;
  float eps;
} p;

shared float qs[MAX_HEAD];
shared float ks[MAX_HEAD];

void main() {
  const uint j = group_index();
  if (j >= p.n_v) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint dk = p.dk, dv = p.dv;
  const uint kh = p.tiled != 0u ? j % p.n_k : j / (p.n_v / p.n_k);
  const uint conv_dim = 2 * p.n_k * dk + p.n_v * dv, value_dim = p.n_v * dv;
  const uint s0 = p.state_offset + j * dk * dv;
  if (p.fresh != 0u) {
    for (uint i = tid; i < dv; i += WG_SIZE) {
      for (uint r = 0; r < dk; ++r) state[s0 + r * dv + i] = 0.0;
    }
  }
  float o[MAX_COLUMNS];  // this invocation's columns' outputs
  for (uint t = p.t0; t < p.t0 + p.n_tokens; ++t) {
    const uint row = t * conv_dim;
    float sq = 0.0, sk = 0.0;
    for (uint r = tid; r < dk; r += WG_SIZE) {
      const float qv = conv[row + kh * dk + r], kv = conv[row + (p.n_k + kh) * dk + r];
      qs[r] = qv;
      ks[r] = kv;
      sq += qv * qv;
      sk += kv * kv;
    }
    sq = workgroup_sum(sq);  // its barriers also make qs and ks whole
    sk = workgroup_sum(sk);
    const float q_scale = 1.0 / max(sqrt(sq), p.eps), k_scale = 1.0 / max(sqrt(sk), p.eps);
    const float beta = 1.0 / (1.0 + exp(-b[t * p.b_stride + p.b_offset + j]));
    const float x = alpha[t * p.alpha_stride + p.alpha_offset + j] + dt_bias[j];
    const float softplus = x > 20.0 ? x : log(1.0 + exp(x));
    const float decay = exp(softplus * a[j]);
    float sum_sq = 0.0;
    uint n_col = 0;
    for (uint i = tid; i < dv; i += WG_SIZE, ++n_col) {
      float s_k = 0.0;
      for (uint r = 0; r < dk; ++r) s_k += state[s0 + r * dv + i] * decay * (ks[r] * k_scale);
      const float u = beta * (conv[row + 2 * p.n_k * dk + j * dv + i] - s_k);
      float acc = 0.0;
      for (uint r = 0; r < dk; ++r) {
        const float s = state[s0 + r * dv + i] * decay + (ks[r] * k_scale) * u;
        state[s0 + r * dv + i] = s;
        acc += s * (qs[r] * q_scale);
      }
      o[n_col] = acc * p.scale;
      sum_sq += o[n_col] * o[n_col];
    }
    const float rms = inversesqrt(workgroup_sum(sum_sq) / float(dv) + p.eps);
    n_col = 0;
    for (uint i = tid; i < dv; i += WG_SIZE, ++n_col) {
      const float g = z[t * value_dim + j * dv + i];
      out_[t * value_dim + j * dv + i] = o[n_col] * rms * norm[i] * (g / (1.0 + exp(-g)));
    }
  }
}
