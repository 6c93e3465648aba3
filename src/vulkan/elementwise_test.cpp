// The norm, activation, rope, softmax, add and scale shaders against the engine's CPU operations
// (engine/ops.h) on random data, in both reduction variants where they reduce.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/ops.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

std::vector<float> random_floats(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
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

std::vector<float> host_copy(Context& context, const Buffer& b) {
  std::vector<float> v(b.bytes() / 4);
  download(context, b, v.data(), v.size() * 4);
  return v;
}

// |got - want| <= bound * (|want| + floor), element by element.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double bound,
                  double floor = 1.0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], bound * (std::fabs(want[i]) + floor)) << "element " << i;
  }
}

class VulkanReduceTest : public testing::TestWithParam<bool> {
 protected:
  Kernels& kernels(TestDevice& device) { return GetParam() ? *device.kernels : *device.shared; }
};

TEST_P(VulkanReduceTest, RmsNormMatchesTheEngine) {
  HERD_TEST_VULKAN_CONTEXT(context);
  for (const int64_t n : {1, 7, 128, 1000, 5120}) {
    const int64_t rows = 3;
    const std::vector<float> x = random_floats(size_t(n * rows), 3.0f, uint32_t(n));
    const std::vector<float> w = random_floats(size_t(n), 1.0f, uint32_t(n + 1));
    std::vector<float> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      engine::rms_norm(&x[size_t(r * n)], w.data(), n, 1e-5f, &want[size_t(r * n)]);
    }
    Buffer bx = device_copy(context, x), bw = device_copy(context, w);
    Recorder rec(context);
    rec.begin();
    kernels(herd_test_device).rms_norm(rec, bx, bw, bx, n, rows, 1e-5f);  // in place
    rec.submit_and_wait();
    SCOPED_TRACE("n " + std::to_string(n));
    expect_close(host_copy(context, bx), want, 1e-5, 0.0);
  }
}

TEST_P(VulkanReduceTest, SoftmaxMatchesTheEngine) {
  HERD_TEST_VULKAN_CONTEXT(context);
  for (const int64_t n : {1, 5, 200, 4097}) {
    const int64_t rows = 4;
    const std::vector<float> x = random_floats(size_t(n * rows), 6.0f, uint32_t(n));
    std::vector<float> want = x;
    for (int64_t r = 0; r < rows; ++r) engine::softmax(&want[size_t(r * n)], n);
    Buffer bx = device_copy(context, x);
    Recorder rec(context);
    rec.begin();
    kernels(herd_test_device).softmax(rec, bx, n, rows);
    rec.submit_and_wait();
    SCOPED_TRACE("n " + std::to_string(n));
    expect_close(host_copy(context, bx), want, 1e-5, 1e-3 / double(n));
  }
}

INSTANTIATE_TEST_SUITE_P(Reductions, VulkanReduceTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "subgroup" : "shared");
                         });

TEST(VulkanElementwise, SiluMulMatchesTheEngine) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t n = 70001;  // several workgroups and a ragged end
  const std::vector<float> gate = random_floats(size_t(n), 4.0f, 1);
  const std::vector<float> up = random_floats(size_t(n), 1.0f, 2);
  std::vector<float> want = gate;
  engine::silu_mul(want.data(), up.data(), n);
  Buffer bg = device_copy(context, gate), bu = device_copy(context, up);
  Buffer out(context, size_t(n) * 4, BufferKind::kDevice);
  Recorder rec(context);
  rec.begin();
  herd_test_device.kernels->silu_mul(rec, bg, bu, out, n);
  herd_test_device.kernels->silu_mul(rec, bg, bu, bg, n);  // in place
  rec.submit_and_wait();
  expect_close(host_copy(context, out), want, 1e-5, 1e-6);
  expect_close(host_copy(context, bg), want, 1e-5, 1e-6);
}

TEST(VulkanElementwise, GatedActivationsMatchTheEngine) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t n = 5000;
  const std::vector<float> gate = random_floats(size_t(n), 5.0f, 5);
  const std::vector<float> up = random_floats(size_t(n), 4.0f, 6);
  struct Kind {
    GatedActivation kind;
    void (*reference)(float* x, const float* up, int64_t n);
    const char* name;
  };
  const Kind kinds[] = {
      {GatedActivation::kSiluMul, engine::silu_mul, "silu"},
      {GatedActivation::kGeluTanhMul, engine::gelu_tanh_mul, "gelu_tanh"},
      {GatedActivation::kSwigluOaiMul, engine::swiglu_oai_mul, "swiglu_oai"},
      {GatedActivation::kSiluClampMul,
       [](float* x, const float* u, int64_t count) { engine::silu_clamp_mul(x, u, count, 2.5f); },
       "silu_clamp"},
  };
  Buffer bg = device_copy(context, gate), bu = device_copy(context, up);
  Buffer out(context, size_t(n) * 4, BufferKind::kDevice);
  for (const Kind& k : kinds) {
    SCOPED_TRACE(k.name);
    std::vector<float> want = gate;
    k.reference(want.data(), up.data(), n);
    Recorder rec(context);
    rec.begin();
    herd_test_device.kernels->gated(rec, k.kind, bg, bu, out, n, 2.5f);
    rec.submit_and_wait();
    // 1e-5 relative, plus float rounding of the activation's terms before they cancel
    // (gelu's 1 + tanh near -1): a millionth of |gate * up|.
    const std::vector<float> got = host_copy(context, out);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i]) + 1e-6 * std::fabs(gate[i] * up[i]))
          << "element " << i << ", gate " << gate[i] << ", up " << up[i];
    }
  }
}

TEST(VulkanElementwise, AddMatchesTheHost) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t n = 1000;
  const std::vector<float> a = random_floats(size_t(n), 1.0f, 3);
  const std::vector<float> b = random_floats(size_t(n), 1.0f, 4);
  std::vector<float> want(static_cast<size_t>(n));
  for (size_t i = 0; i < want.size(); ++i) want[i] = a[i] + b[i];
  Buffer ba = device_copy(context, a), bb = device_copy(context, b);
  Recorder rec(context);
  rec.begin();
  herd_test_device.kernels->add(rec, ba, bb, ba, n);
  rec.submit_and_wait();
  expect_close(host_copy(context, ba), want, 0.0, 0.0);  // one rounding, as on the CPU
}

TEST(VulkanElementwise, ScaleMatchesTheHost) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t n = 1000;
  const float s = 0.37f;
  const std::vector<float> x = random_floats(size_t(n), 3.0f, 5);
  std::vector<float> want = x;
  for (size_t i = 0; i + 1 < want.size(); ++i) want[i] *= s;  // the last one is past n - 1
  Buffer bx = device_copy(context, x);
  Recorder rec(context);
  rec.begin();
  herd_test_device.kernels->scale(rec, bx, s, n - 1);
  rec.submit_and_wait();
  expect_close(host_copy(context, bx), want, 0.0, 0.0);  // one rounding, as on the CPU
}

// Both styles, a partial rotation at either end of the head, and positions far from zero
// with YaRN and frequency factors: the angles come from engine::rope_angles on the host.
TEST(VulkanElementwise, RopeMatchesTheEngine) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t n_tokens = 3, n_head = 5, head_dim = 64;
  const int64_t positions[n_tokens] = {0, 17, 30001};
  std::vector<float> factors(16);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + float(i) * 0.25f;
  for (const bool neox : {false, true}) {
    for (const int64_t n_rot : {int64_t(32), head_dim}) {
      for (const int64_t rot_offset : {int64_t(0), head_dim - n_rot}) {
        engine::Rope rope;
        rope.n_rot = n_rot;
        rope.base = 500000.0f;
        rope.freq_scale = 0.25f;
        rope.yarn = true;
        rope.corr_low = 2;
        rope.corr_high = 9;
        rope.magnitude = 1.1f;
        rope.freq_factors = n_rot == 32 ? factors.data() : nullptr;
        std::vector<float> angles(size_t(n_tokens * n_rot));
        for (int64_t t = 0; t < n_tokens; ++t) {
          engine::rope_angles(rope, positions[t], &angles[size_t(t * n_rot)],
                              &angles[size_t(t * n_rot + n_rot / 2)]);
        }
        const std::vector<float> x = random_floats(size_t(n_tokens * n_head * head_dim), 1.0f, 7);
        std::vector<float> want = x;
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t h = 0; h < n_head; ++h) {
            engine::rope_apply(&want[size_t((t * n_head + h) * head_dim + rot_offset)], n_rot,
                               neox ? RopeStyle::kNeoxHalves : RopeStyle::kAdjacentPairs,
                               &angles[size_t(t * n_rot)], &angles[size_t(t * n_rot + n_rot / 2)]);
          }
        }
        Buffer bx = device_copy(context, x), ba = device_copy(context, angles);
        Recorder rec(context);
        rec.begin();
        herd_test_device.kernels->rope(rec, bx, ba,
                                       {n_tokens, n_head, head_dim, n_rot, rot_offset, neox});
        rec.submit_and_wait();
        SCOPED_TRACE(std::string(neox ? "neox" : "normal") + ", n_rot " + std::to_string(n_rot) +
                     ", offset " + std::to_string(rot_offset));
        expect_close(host_copy(context, bx), want, 1e-6);
      }
    }
  }
}

}  // namespace
}  // namespace herd::vulkan
