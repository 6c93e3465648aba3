// The Gated DeltaNet operations of Kernels (kernels.h): the causal conv with its state and
// the gated delta rule over one run of a sequence, and the sigmoid gates of the gated
// attention output and the gated shared expert (Qwen3-Next, Qwen3.5).
#include <cmath>
#include <limits>

#include "util/error.h"
#include "vulkan/kernel_args.h"
#include "vulkan/kernels.h"

namespace herd::vulkan {
namespace {

// The shaders' limits (delta_conv.comp's MAX_KERNEL, delta_rule.comp's MAX_HEAD and its
// per-invocation columns).
constexpr int64_t kMaxKernel = 16;
constexpr int64_t kMaxHead = 256;
constexpr int64_t kMaxColumns = 8;

using detail::ceil_div;
using detail::u32;

}  // namespace

void Kernels::sigmoid_mul(Recorder& r, Binding x, Binding gate, int64_t n, int64_t group) {
  HERD_CHECK(group >= 1);
  const struct { uint32_t n, group; } push{u32(n, "n"), u32(group, "group")};
  const Pipeline& p =
      pipeline("sigmoid_mul", 2, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, gate}, push, ceil_div(uint64_t(n), elementwise_size_));
}

void Kernels::delta_conv(Recorder& r, Binding x, Binding weight, Binding state, Binding out,
                         const DeltaNetShape& s) {
  if (s.conv_kernel < 1 || s.conv_kernel > kMaxKernel) {
    throw Error("vulkan", "a Gated DeltaNet conv of " + std::to_string(s.conv_kernel) +
                              " taps (the shader takes 1 to 16)");
  }
  const int64_t channels = s.conv_dim();
  const struct {
    uint32_t n_tokens, channels, kernel, x_offset, out_offset, state_offset, fresh;
  } push{u32(s.n_tokens, "tokens"),
         u32(channels, "channels"),
         u32(s.conv_kernel, "kernel"),
         u32(s.t0 * channels, "conv input offset"),
         u32(s.t0 * channels, "conv output offset"),
         u32(s.state_offset, "state offset"),
         s.fresh ? 1u : 0u};
  u32((s.t0 + s.n_tokens) * channels, "conv elements");
  const Pipeline& p =
      pipeline("delta_conv", 4, sizeof(push), {elementwise_size_, context_.info().subgroup_size});
  r.dispatch(p, {x, weight, state, out}, push, ceil_div(uint64_t(channels), elementwise_size_));
}

void Kernels::delta_rule(Recorder& r, Binding conv, Binding b, Binding alpha, Binding z,
                         Binding dt_bias, Binding a, Binding norm, Binding state, Binding out,
                         const DeltaNetShape& s) {
  if (s.dk < 1 || s.dv < 1 || s.dk > kMaxHead || s.dv > kMaxHead ||
      s.dv > kMaxColumns * int64_t(reduce_size_) || s.n_k < 1 || s.n_v % s.n_k != 0) {
    throw Error("vulkan", "Gated DeltaNet heads of " + std::to_string(s.dk) + " x " +
                              std::to_string(s.dv) + ", " + std::to_string(s.n_k) + " K and " +
                              std::to_string(s.n_v) +
                              " V heads (the shader takes heads up to 256 and V heads in whole "
                              "groups of the K heads)");
  }
  const struct {
    uint32_t n_tokens, t0, dk, dv, n_k, n_v, tiled, b_stride, b_offset, alpha_stride, alpha_offset,
        state_offset, fresh;
    float scale, eps;
  } push{u32(s.n_tokens, "tokens"),
         u32(s.t0, "first token"),
         u32(s.dk, "dk"),
         u32(s.dv, "dv"),
         u32(s.n_k, "K heads"),
         u32(s.n_v, "V heads"),
         s.tiled ? 1u : 0u,
         u32(s.b_stride, "beta stride"),
         u32(s.b_offset, "beta offset"),
         u32(s.alpha_stride, "alpha stride"),
         u32(s.alpha_offset, "alpha offset"),
         u32(s.state_offset + s.conv_floats(), "state offset"),
         s.fresh ? 1u : 0u,
         1.0f / std::sqrt(float(s.dk)),
         s.eps};
  u32((s.t0 + s.n_tokens) * s.conv_dim(), "conv elements");
  u32(s.state_offset + s.conv_floats() + s.n_v * s.dk * s.dv, "state elements");
  const Pipeline& p = pipeline(subgroups_ ? "delta_rule_subgroup" : "delta_rule_shared", 9,
                               sizeof(push), {reduce_size_, context_.info().subgroup_size});
  r.dispatch(p, {conv, b, alpha, z, dt_bias, a, norm, state, out}, push, uint64_t(s.n_v));
}

}  // namespace herd::vulkan
