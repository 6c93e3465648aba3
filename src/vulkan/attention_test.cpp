// The decode attention shader against the CPU's scalar attend (kernels/attention.h) on
// random data: grouped-query heads over an F16 cache, with and without sinks, and MLA's
// latent form (values are the first v_dim of each key row), in both reduction variants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "quant/float16.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

struct Case {
  int64_t n_head, n_kv_head, k_dim, v_dim, n_pos;
  bool sinks;
  bool mla;              // values are the keys' first v_dim
  int64_t n_tokens = 1;  // the last n_tokens positions, causal (a prefill chunk)
  int64_t window = 0;
};

class VulkanAttentionTest : public testing::TestWithParam<bool> {};

TEST_P(VulkanAttentionTest, MatchesTheScalarKernel) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& device_kernels = GetParam() ? *herd_test_device.kernels : *herd_test_device.shared;
  const Case cases[] = {
      {1, 1, 2, 2, 1, false, false},          {8, 2, 64, 64, 7, false, false},
      {8, 2, 64, 64, 300, true, false},       {4, 4, 128, 128, 2049, false, false},
      {16, 1, 576, 512, 37, false, true},     {6, 3, 80, 80, 130, true, false},
      {4, 2, 32, 32, 40, false, false, 9},    {4, 2, 32, 32, 40, true, false, 9, 6},
      {8, 1, 64, 48, 20, false, true, 20, 5},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_kv_head) +
                 ", dims " + std::to_string(c.k_dim) + "/" + std::to_string(c.v_dim) +
                 ", positions " + std::to_string(c.n_pos) + ", tokens " +
                 std::to_string(c.n_tokens) + ", window " + std::to_string(c.window));
    std::mt19937 rng(seed++);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // The cache: [n_pos][n_kv_head][k_dim] keys, and as much of values (MLA: none).
    const int64_t stride = c.n_kv_head * c.k_dim;
    std::vector<uint16_t> keys(size_t(c.n_pos * stride)), values(keys.size());
    for (uint16_t& k : keys) k = fp32_to_fp16(normal(rng));
    for (uint16_t& v : values) v = fp32_to_fp16(normal(rng));
    std::vector<float> q(size_t(c.n_tokens * c.n_head * c.k_dim)), sinks(size_t(c.n_head));
    for (float& v : q) v = normal(rng);
    for (float& v : sinks) v = normal(rng) * 2.0f;
    const float scale = 1.0f / std::sqrt(float(c.k_dim));
    const uint16_t* value_rows = c.mla ? keys.data() : values.data();

    std::vector<float> want(size_t(c.n_tokens * c.n_head * c.v_dim));
    std::vector<float> scratch(
        size_t(kernels::attend_scratch_floats(1, c.n_pos, c.k_dim, c.v_dim)));
    const kernels::AttendFn attend =
        kernels::attend_kernel(kernels::Isa::kScalar, c.k_dim, c.v_dim);
    for (int64_t th = 0; th < c.n_tokens * c.n_head; ++th) {
      const int64_t h = th % c.n_head;
      const int64_t pos = c.n_pos - c.n_tokens + th / c.n_head;
      const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      const int64_t g = h / (c.n_head / c.n_kv_head);
      kernels::AttendArgs a;
      a.q = &q[size_t(th * c.k_dim)];
      a.keys = keys.data() + first * stride + g * c.k_dim;
      a.values = value_rows + first * stride + g * c.k_dim;
      a.stride = stride;
      a.n_pos = pos - first + 1;
      a.k_dim = c.k_dim;
      a.v_dim = c.v_dim;
      a.scale = scale;
      a.sinks = c.sinks ? &sinks[size_t(h)] : nullptr;
      a.scores = scratch.data();
      a.out = &want[size_t(th * c.v_dim)];
      attend(a);
    }

    Buffer bq(context, q.size() * 4, BufferKind::kDevice),
        bs(context, sinks.size() * 4, BufferKind::kDevice);
    Buffer bk(context, keys.size() * 2, BufferKind::kDevice),
        bv(context, values.size() * 2, BufferKind::kDevice);
    Buffer scores(context, size_t(c.n_tokens * c.n_head * c.n_pos) * 4, BufferKind::kDevice);
    Buffer out(context, want.size() * 4, BufferKind::kDevice);
    upload(context, bq, q.data(), q.size() * 4);
    upload(context, bs, sinks.data(), sinks.size() * 4);
    upload(context, bk, keys.data(), keys.size() * 2);
    upload(context, bv, values.data(), values.size() * 2);
    AttentionShape shape;
    shape.n_head = c.n_head;
    shape.n_kv_head = c.n_kv_head;
    shape.n_pos = c.n_pos;
    shape.k_dim = c.k_dim;
    shape.v_dim = c.v_dim;
    shape.stride = stride;
    shape.head_stride = c.k_dim;
    shape.scale = scale;
    shape.n_tokens = c.n_tokens;
    shape.window = c.window;
    Recorder r(context);
    r.begin();
    const Binding sink_binding(bs);
    device_kernels.attend(r, bq, bk, c.mla ? bk : bv, c.sinks ? &sink_binding : nullptr, scores,
                          out, shape);
    r.submit_and_wait();
    std::vector<float> got(want.size());
    download(context, out, got.data(), got.size() * 4);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reductions, VulkanAttentionTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "subgroup" : "shared");
                         });

}  // namespace
}  // namespace herd::vulkan
