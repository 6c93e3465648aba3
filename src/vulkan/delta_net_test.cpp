// The Gated DeltaNet shaders (delta_conv, delta_rule) against the engine's CPU mixing
// (engine/delta_net.h delta_net_mix) on random data: a batch of runs of two slots, one of
// them starting afresh over a state of garbage, the other continuing its state across two
// runs; and the sigmoid gates against their formula. Both reduction variants.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/delta_net.h"
#include "util/thread_pool.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

std::vector<float> random_floats(size_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

Buffer device_copy(Context& context, const std::vector<float>& v) {
  Buffer b(context, v.size() * 4, BufferKind::kDevice);
  upload(context, b, v.data(), v.size() * 4);
  return b;
}

std::vector<float> host_copy(Context& context, const Buffer& b, size_t n) {
  std::vector<float> v(n);
  download(context, b, v.data(), n * 4);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double bound,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], bound * (std::fabs(want[i]) + 1.0)) << what << " " << i;
  }
}

class VulkanDeltaNetTest : public testing::TestWithParam<bool> {
 protected:
  Kernels& kernels(TestDevice& device) { return GetParam() ? *device.kernels : *device.shared; }
};

TEST_P(VulkanDeltaNetTest, ConvAndRuleMatchTheEngine) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& k = kernels(herd_test_device);
  // Head sizes that are not powers of two; dk past one workgroup's invocations.
  const engine::DeltaNetDims d{2, 4, 160, 72, 4, 1e-6f};
  const int64_t conv_dim = d.conv_dim(), value_dim = d.value_dim(), n_v = d.n_v_heads;
  const engine::RecurrentShape shape = d.state_shape();
  for (const bool tiled : {false, true}) {
    SCOPED_TRACE(tiled ? "tiled" : "grouped");
    std::mt19937 rng(tiled ? 7 : 3);
    const std::vector<float> conv_w = random_floats(size_t(d.conv_kernel * conv_dim), 0.5f, rng);
    const std::vector<float> dt_bias = random_floats(size_t(n_v), 0.5f, rng);
    const std::vector<float> a = {-1.0f, -2.5f, -4.0f, -8.0f};
    std::vector<float> norm = random_floats(size_t(d.dv), 0.1f, rng);
    for (float& x : norm) x += 1.0f;
    std::vector<int32_t> k_head;
    for (int32_t j = 0; j < n_v; ++j) {
      k_head.push_back(tiled ? j % int32_t(d.n_k_heads) : j / int32_t(n_v / d.n_k_heads));
    }
    // Runs: slot 1 continuing (3 tokens), slot 0 afresh (2), slot 1 again (1).
    engine::Batch batch;
    for (int32_t pos : {5, 6, 7}) batch.add(1, 1, pos, true);
    for (int32_t pos : {0, 1}) batch.add(1, 0, pos, true);
    batch.add(1, 1, 8, true);
    const int64_t n = batch.size();
    const std::vector<float> qkv = random_floats(size_t(n * conv_dim), 1.0f, rng);
    const std::vector<float> z = random_floats(size_t(n * value_dim), 1.0f, rng);
    const std::vector<float> ba = random_floats(size_t(n * 2 * n_v), 1.0f, rng);  // [b | alpha]
    const std::vector<float> states = random_floats(size_t(2 * shape.floats()), 0.5f, rng);

    // The CPU: the cache's two slots hold the states; slot 0 starts afresh (zeroed, as
    // KvCache::begin_recurrent does).
    engine::CacheLayout layout;
    layout.layers = {{.kind = engine::LayerCache::kRecurrent}};
    layout.n_seq = 2;
    layout.recurrent = shape;
    engine::KvCache cache(layout);
    std::copy(states.begin(), states.end(), cache.conv_state(0, 0));
    std::fill_n(cache.conv_state(0, 0), shape.floats(), 0.0f);
    std::vector<float> b(size_t(n * n_v)), alpha(size_t(n * n_v));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < n_v; ++j) {
        b[size_t(t * n_v + j)] = ba[size_t(t * 2 * n_v + j)];
        alpha[size_t(t * n_v + j)] = ba[size_t(t * 2 * n_v + n_v + j)];
      }
    }
    std::vector<float> want(size_t(n * value_dim));
    ThreadPool pool(2);
    engine::DeltaNetScratch scratch;
    scratch.reserve(d, n, pool.size());
    engine::delta_net_mix(d, {conv_w.data(), dt_bias.data(), a.data(), norm.data(), k_head.data()},
                          batch, 0, cache,
                          {qkv.data(), z.data(), b.data(), alpha.data(), want.data()},
                          kernels::Isa::kScalar, scratch, pool);

    // The device: the same states, slot 0 flagged fresh over its garbage.
    Buffer bqkv = device_copy(context, qkv), bz = device_copy(context, z);
    Buffer bba = device_copy(context, ba), bw = device_copy(context, conv_w);
    Buffer bdt = device_copy(context, dt_bias), ba_ = device_copy(context, a);
    Buffer bnorm = device_copy(context, norm), bstate = device_copy(context, states);
    Buffer bconv(context, size_t(n * conv_dim) * 4, BufferKind::kDevice);
    Buffer bout(context, size_t(n * value_dim) * 4, BufferKind::kDevice);
    Recorder r(context);
    r.begin();
    struct Run {
      int64_t seq, t0, len;
    };
    for (const Run& run : {Run{1, 0, 3}, Run{0, 3, 2}, Run{1, 5, 1}}) {
      const auto [seq, t0, len] = run;
      DeltaNetShape s;
      s.n_tokens = len;
      s.t0 = t0;
      s.n_k = d.n_k_heads;
      s.n_v = n_v;
      s.dk = d.dk;
      s.dv = d.dv;
      s.conv_kernel = d.conv_kernel;
      s.tiled = tiled;
      s.b_stride = s.alpha_stride = 2 * n_v;
      s.b_offset = 0;
      s.alpha_offset = n_v;
      s.state_offset = seq * shape.floats();
      s.fresh = batch.pos[size_t(t0)] == 0;
      s.eps = d.rms_eps;
      k.delta_conv(r, bqkv, bw, bstate, bconv, s);
      k.delta_rule(r, bconv, bba, bba, bz, bdt, ba_, bnorm, bstate, bout, s);
    }
    r.submit_and_wait();
    expect_close(host_copy(context, bout, want.size()), want, 2e-4, "output");
    const float* cpu_states = cache.conv_state(0, 0);
    expect_close(host_copy(context, bstate, states.size()),
                 std::vector<float>(cpu_states, cpu_states + states.size()), 2e-4, "state");
  }
}

TEST_P(VulkanDeltaNetTest, SigmoidGatesPerElementAndPerRow) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& k = kernels(herd_test_device);
  std::mt19937 rng(11);
  const int64_t rows = 5, width = 300;
  const std::vector<float> x = random_floats(size_t(rows * width), 2.0f, rng);
  for (const int64_t group : {int64_t(1), width}) {
    const std::vector<float> gate = random_floats(size_t(rows * width / group), 3.0f, rng);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      want[i] = x[i] / (1.0f + std::exp(-gate[i / size_t(group)]));
    }
    Buffer bx = device_copy(context, x), bg = device_copy(context, gate);
    Recorder r(context);
    r.begin();
    k.sigmoid_mul(r, bx, bg, rows * width, group);
    r.submit_and_wait();
    expect_close(host_copy(context, bx, x.size()), want, 1e-5, "gated");
  }
}

INSTANTIATE_TEST_SUITE_P(Reductions, VulkanDeltaNetTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "Subgroup" : "Shared";
                         });

}  // namespace
}  // namespace herd::vulkan
