#include "kernels/delta_net.h"

#include <algorithm>
#include <cmath>

#include "kernels/delta_net_simd.h"

namespace herd::kernels {

void conv1d_silu(const ConvArgs& a) {
  const int64_t n_hist = a.kernel - 1;
  // Input i of the run's virtual sequence [state rows; x rows]: token t reads i = t .. t +
  // kernel - 1.
  auto input = [&](int64_t i) {
    return i < n_hist ? a.state + i * a.state_stride : a.x + (i - n_hist) * a.x_stride;
  };
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    float* out = a.out + t * a.out_stride;
    std::fill(out, out + a.channels, 0.0f);
    for (int64_t j = 0; j < a.kernel; ++j) {
      const float* w = a.weight + j * a.weight_stride;
      const float* x = input(t + j);
      for (int64_t c = 0; c < a.channels; ++c) out[c] += w[c] * x[c];
    }
    for (int64_t c = 0; c < a.channels; ++c) out[c] = out[c] / (1.0f + std::exp(-out[c]));
  }
  // The new state is rows n .. n + kernel - 2 of the virtual sequence; row r reads row
  // n + r >= r, so ascending r never reads a row it has overwritten.
  for (int64_t r = 0; r < n_hist; ++r) {
    const float* src = input(a.n_tokens + r);
    float* dst = a.state + r * a.state_stride;
    if (src != dst) std::copy(src, src + a.channels, dst);
  }
}

void l2_normalize(float* x, int64_t n, float eps) {
  double sum = 0;  // as the reference: a double sum of float squares
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

int64_t delta_rule_scratch_floats(int64_t dk, int64_t dv) {
  static_cast<void>(dk);
  const int64_t c = kDeltaChunk;
  return std::max(2 * dv, c + 3 * c * dv + 2 * c * c);
}

namespace scalar {

void delta_rule_recurrent(const DeltaRuleArgs& a) {
  const int64_t dk = a.dk, dv = a.dv;
  float* u = a.scratch;  // [dv]
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.q_stride;
    const float* k = a.k + t * a.k_stride;
    const float* v = a.v + t * a.v_stride;
    const float beta = a.beta[t * a.gate_stride];
    const float decay = std::exp(a.g[t * a.gate_stride]);
    float* out = a.out + t * a.out_stride;
    // S <- decay S; u = beta (v - S k); S <- S + k u^T (in [dk][dv] rows); o = S^T (scale q).
    for (int64_t i = 0; i < dk * dv; ++i) a.state[i] *= decay;
    for (int64_t j = 0; j < dv; ++j) {
      float sk = 0;
      for (int64_t i = 0; i < dk; ++i) sk += a.state[i * dv + j] * k[i];
      u[j] = beta * (v[j] - sk);
    }
    for (int64_t i = 0; i < dk; ++i) {
      for (int64_t j = 0; j < dv; ++j) a.state[i * dv + j] += k[i] * u[j];
    }
    for (int64_t j = 0; j < dv; ++j) {
      float o = 0;
      for (int64_t i = 0; i < dk; ++i) o += a.state[i * dv + j] * q[i];
      out[j] = o * a.scale;
    }
  }
}

namespace {
// Width-1 vectors: the chunked form of delta_net_simd.h in plain floats.
struct V {
  using F = float;
  static constexpr int64_t kWidth = 1;
  static F zero() { return 0.0f; }
  static F set1(float v) { return v; }
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F fma(F a, F b, F c) { return a * b + c; }
  static float reduce_add(F v) { return v; }
};
}  // namespace

void delta_rule_chunked(const DeltaRuleArgs& a) {
  chunked_with<V>(a);
}

}  // namespace scalar

DeltaRuleFn delta_rule_kernel(Isa isa, int64_t dv, bool chunked) {
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::kAvx512 && dv % 16 == 0) {
    return chunked ? avx512::delta_rule_chunked : avx512::delta_rule_recurrent;
  }
  if ((isa == Isa::kAvx512 || isa == Isa::kAvx2) && dv % 8 == 0) {
    return chunked ? avx2::delta_rule_chunked : avx2::delta_rule_recurrent;
  }
#elif defined(__aarch64__)
  if (isa == Isa::kNeon && dv % 4 == 0) {
    return chunked ? neon::delta_rule_chunked : neon::delta_rule_recurrent;
  }
#else
  static_cast<void>(isa);
  static_cast<void>(dv);
#endif
  return chunked ? &scalar::delta_rule_chunked : &scalar::delta_rule_recurrent;
}

}  // namespace herd::kernels
