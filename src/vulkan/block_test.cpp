// One decode step of a small transformer block, every operation on the device in one
// recording submitted once (the shape of the forward pass a Vulkan backend will record),
// against the same step on the CPU: the engine's operations, the scalar attention, and
// matrix products over the dequantized weights.
//   h = rms_norm(x) ; q, k, v = W h ; rope(q, k) ; k, v -> F16 cache at pos ;
//   x += Wo attend(q, cache) ; x += Wdown silu(Wgate rms_norm(x)) * Wup rms_norm(x)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/ops.h"
#include "engine/router.h"
#include "kernels/attention.h"
#include "quant/float16.h"
#include "quant/types.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

constexpr int64_t kEmbd = 64, kHead = 4, kKvHead = 2, kHeadDim = 16, kFf = 96, kPos = 5;
constexpr int64_t kKvDim = kKvHead * kHeadDim;

// A weight matrix in a GGUF type, its dequantized floats, and its device copy.
struct Weight {
  TensorType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;  // [rows][cols]
  Buffer buffer;
};

Weight make_weight(Context& context, TensorType type, int64_t rows, int64_t cols,
                   std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> w(size_t(rows * cols));
  for (float& v : w) v = normal(rng);
  Weight m{type,
           rows,
           cols,
           std::vector<uint8_t>(row_bytes(type, cols) * size_t(rows)),
           std::vector<float>(w.size()),
           Buffer()};
  type_traits(type).quantize(w.data(), m.bytes.data(), rows * cols);
  type_traits(type).dequantize(m.bytes.data(), m.dequantized.data(), rows * cols);
  m.buffer = Buffer(context, m.bytes.size(), BufferKind::kDevice, "weight");
  upload(context, m.buffer, m.bytes.data(), m.bytes.size());
  return m;
}

// y = W x in double over the dequantized weights (the shaders' numerics: f32 activations).
std::vector<float> host_matvec(const Weight& w, const std::vector<float>& x) {
  std::vector<float> y(static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < w.cols; ++c)
      sum += double(w.dequantized[size_t(r * w.cols + c)]) * x[size_t(c)];
    y[size_t(r)] = float(sum);
  }
  return y;
}

Buffer device_floats(Context& context, const std::vector<float>& v) {
  Buffer b(context, v.size() * 4, BufferKind::kDevice);
  upload(context, b, v.data(), v.size() * 4);
  return b;
}

TEST(VulkanBlock, OneDecodeStepInOneSubmission) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& k = *herd_test_device.kernels;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Weight wq = make_weight(context, TensorType::Q8_0, kHead * kHeadDim, kEmbd, rng);
  Weight wk = make_weight(context, TensorType::Q4_0, kKvDim, kEmbd, rng);
  Weight wv = make_weight(context, TensorType::F16, kKvDim, kEmbd, rng);
  Weight wo = make_weight(context, TensorType::Q5_0, kEmbd, kHead * kHeadDim, rng);
  Weight wgate = make_weight(context, TensorType::Q8_0, kFf, kEmbd, rng);
  Weight wup = make_weight(context, TensorType::Q4_1, kFf, kEmbd, rng);
  Weight wdown = make_weight(context, TensorType::IQ4_NL, kEmbd, kFf, rng);
  std::vector<float> x(kEmbd), attn_norm(kEmbd), ffn_norm(kEmbd);
  for (float& v : x) v = normal(rng);
  for (float& v : attn_norm) v = 1.0f + 0.1f * normal(rng);
  for (float& v : ffn_norm) v = 1.0f + 0.1f * normal(rng);
  // The cache holds kPos earlier positions; this step writes position kPos.
  std::vector<uint16_t> k_cache(size_t((kPos + 1) * kKvDim)), v_cache(k_cache.size());
  for (uint16_t& h : k_cache) h = fp32_to_fp16(normal(rng));
  for (uint16_t& h : v_cache) h = fp32_to_fp16(normal(rng));
  engine::Rope rope;
  rope.n_rot = kHeadDim;
  rope.base = 10000.0f;
  std::vector<float> angles(kHeadDim);
  engine::rope_angles(rope, kPos, angles.data(), angles.data() + kHeadDim / 2);
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  const float eps = 1e-5f;

  // ---- the CPU
  std::vector<float> want = x;
  std::vector<uint16_t> k_host = k_cache, v_host = v_cache;
  {
    std::vector<float> h(kEmbd);
    engine::rms_norm(want.data(), attn_norm.data(), kEmbd, eps, h.data());
    std::vector<float> q = host_matvec(wq, h), kk = host_matvec(wk, h), vv = host_matvec(wv, h);
    for (int64_t i = 0; i < kHead; ++i) {
      engine::rope_apply(&q[size_t(i * kHeadDim)], kHeadDim, RopeStyle::kAdjacentPairs,
                         angles.data(), angles.data() + kHeadDim / 2);
    }
    for (int64_t i = 0; i < kKvHead; ++i) {
      engine::rope_apply(&kk[size_t(i * kHeadDim)], kHeadDim, RopeStyle::kAdjacentPairs,
                         angles.data(), angles.data() + kHeadDim / 2);
    }
    for (int64_t i = 0; i < kKvDim; ++i) {
      k_host[size_t(kPos * kKvDim + i)] = fp32_to_fp16(kk[size_t(i)]);
      v_host[size_t(kPos * kKvDim + i)] = fp32_to_fp16(vv[size_t(i)]);
    }
    std::vector<float> attn(size_t(kHead * kHeadDim));
    std::vector<float> scratch(
        size_t(kernels::attend_scratch_floats(1, kPos + 1, kHeadDim, kHeadDim)));
    for (int64_t i = 0; i < kHead; ++i) {
      const int64_t g = i / (kHead / kKvHead);
      kernels::AttendArgs a;
      a.q = &q[size_t(i * kHeadDim)];
      a.keys = k_host.data() + g * kHeadDim;
      a.values = v_host.data() + g * kHeadDim;
      a.stride = kKvDim;
      a.n_pos = kPos + 1;
      a.k_dim = a.v_dim = kHeadDim;
      a.scale = scale;
      a.scores = scratch.data();
      a.out = &attn[size_t(i * kHeadDim)];
      kernels::attend_kernel(kernels::Isa::kScalar, kHeadDim, kHeadDim)(a);
    }
    const std::vector<float> o = host_matvec(wo, attn);
    for (int64_t i = 0; i < kEmbd; ++i) want[size_t(i)] += o[size_t(i)];
    engine::rms_norm(want.data(), ffn_norm.data(), kEmbd, eps, h.data());
    std::vector<float> g = host_matvec(wgate, h);
    const std::vector<float> u = host_matvec(wup, h);
    engine::silu_mul(g.data(), u.data(), kFf);
    const std::vector<float> d = host_matvec(wdown, g);
    for (int64_t i = 0; i < kEmbd; ++i) want[size_t(i)] += d[size_t(i)];
  }

  // ---- the device: every step recorded, one submission
  Buffer bx = device_floats(context, x), b_attn_norm = device_floats(context, attn_norm);
  Buffer b_ffn_norm = device_floats(context, ffn_norm), b_angles = device_floats(context, angles);
  Buffer bk(context, k_cache.size() * 2, BufferKind::kDevice, "keys");
  Buffer bv(context, v_cache.size() * 2, BufferKind::kDevice, "values");
  upload(context, bk, k_cache.data(), k_cache.size() * 2);
  upload(context, bv, v_cache.data(), v_cache.size() * 2);
  const auto scratch = [&](int64_t n) {
    return Buffer(context, size_t(n) * 4, BufferKind::kDevice);
  };
  Buffer h = scratch(kEmbd), q = scratch(kHead * kHeadDim), kk = scratch(kKvDim),
         vv = scratch(kKvDim), scores = scratch(kHead * (kPos + 1)),
         attn = scratch(kHead * kHeadDim), o = scratch(kEmbd), g = scratch(kFf), u = scratch(kFf);
  AttentionShape shape;
  shape.n_head = kHead;
  shape.n_kv_head = kKvHead;
  shape.n_pos = kPos + 1;
  shape.k_dim = shape.v_dim = kHeadDim;
  shape.stride = kKvDim;
  shape.head_stride = kHeadDim;
  shape.scale = scale;

  Recorder r(context);
  r.begin();
  k.rms_norm(r, bx, b_attn_norm, h, kEmbd, 1, eps);
  k.matvec(r, wq.type, wq.buffer, h, q, wq.rows, wq.cols);
  k.matvec(r, wk.type, wk.buffer, h, kk, wk.rows, wk.cols);
  k.matvec(r, wv.type, wv.buffer, h, vv, wv.rows, wv.cols);
  k.rope(r, q, b_angles, {1, kHead, kHeadDim, kHeadDim, 0, false});
  k.rope(r, kk, b_angles, {1, kKvHead, kHeadDim, kHeadDim, 0, false});
  k.store_f16(r, kk, bk, kKvDim, kPos * kKvDim);
  k.store_f16(r, vv, bv, kKvDim, kPos * kKvDim);
  k.attend(r, q, bk, bv, nullptr, scores, attn, shape);
  k.matvec(r, wo.type, wo.buffer, attn, o, wo.rows, wo.cols);
  k.add(r, bx, o, bx, kEmbd);
  k.rms_norm(r, bx, b_ffn_norm, h, kEmbd, 1, eps);
  k.matvec(r, wgate.type, wgate.buffer, h, g, wgate.rows, wgate.cols);
  k.matvec(r, wup.type, wup.buffer, h, u, wup.rows, wup.cols);
  k.silu_mul(r, g, u, g, kFf);
  k.matvec(r, wdown.type, wdown.buffer, g, o, wdown.rows, wdown.cols);
  k.add(r, bx, o, bx, kEmbd);
  EXPECT_EQ(r.n_dispatches(), 17u);
  r.submit_and_wait();

  std::vector<float> got(kEmbd);
  download(context, bx, got.data(), got.size() * 4);
  for (int64_t i = 0; i < kEmbd; ++i) {
    EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-4 * (1 + std::fabs(want[size_t(i)]))) << i;
  }
  std::vector<uint16_t> k_device(k_cache.size());
  download(context, bk, k_device.data(), k_device.size() * 2);
  for (int64_t i = 0; i < kKvDim; ++i) {  // the new row, in f16 (one rounding step apart)
    const size_t at = size_t(kPos * kKvDim + i);
    EXPECT_NEAR(fp16_to_fp32(k_device[at]), fp16_to_fp32(k_host[at]),
                2e-3 * (1 + std::fabs(fp16_to_fp32(k_host[at]))))
        << i;
  }
  EXPECT_EQ(k_device[0], k_cache[0]);  // earlier rows untouched
}

// y = W x over rows [first, first + rows) of a dequantized matrix of `cols` columns.
std::vector<float> host_rows(const Weight& w, int64_t first, int64_t rows, const float* x) {
  std::vector<float> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < w.cols; ++c) {
      sum += double(w.dequantized[size_t((first + r) * w.cols + c)]) * x[c];
    }
    y[size_t(r)] = float(sum);
  }
  return y;
}

// An MoE FFN for a few tokens, on the device in one submission: router logits, routing,
// the chosen experts' gate and up products, SwiGLU, their down products, the weighted sum.
TEST(VulkanBlock, MoeFfnInOneSubmission) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& k = *herd_test_device.kernels;
  constexpr int64_t kTokens = 3, kExpert = 8, kUsed = 2, kExpertFf = 64;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Weight gate_inp = make_weight(context, TensorType::F32, kExpert, kEmbd, rng);
  Weight gate = make_weight(context, TensorType::Q4_0, kExpert * kExpertFf, kEmbd, rng);
  Weight up = make_weight(context, TensorType::Q8_0, kExpert * kExpertFf, kEmbd, rng);
  Weight down = make_weight(context, TensorType::IQ4_NL, kExpert * kEmbd, kExpertFf, rng);
  std::vector<float> x(size_t(kTokens * kEmbd));
  for (float& v : x) v = normal(rng);

  // ---- the CPU
  engine::RouterOptions options;
  options.n_expert = kExpert;
  options.n_used = kUsed;
  engine::Router router(options);
  std::vector<float> want(x.size(), 0.0f);
  for (int64_t t = 0; t < kTokens; ++t) {
    const float* xt = &x[size_t(t * kEmbd)];
    const std::vector<float> logits = host_rows(gate_inp, 0, kExpert, xt);
    int32_t experts[kUsed];
    float weights[kUsed];
    router.route(logits.data(), nullptr, experts, weights);
    for (int64_t j = 0; j < kUsed; ++j) {
      std::vector<float> g = host_rows(gate, experts[j] * kExpertFf, kExpertFf, xt);
      const std::vector<float> u = host_rows(up, experts[j] * kExpertFf, kExpertFf, xt);
      engine::silu_mul(g.data(), u.data(), kExpertFf);
      const std::vector<float> d = host_rows(down, experts[j] * kEmbd, kEmbd, g.data());
      for (int64_t c = 0; c < kEmbd; ++c) want[size_t(t * kEmbd + c)] += weights[j] * d[size_t(c)];
    }
  }

  // ---- the device
  Buffer bx = device_floats(context, x);
  const auto scratch = [&](int64_t n) {
    return Buffer(context, size_t(n) * 4, BufferKind::kDevice);
  };
  Buffer logits = scratch(kTokens * kExpert), ids = scratch(kTokens * kUsed),
         weights = scratch(kTokens * kUsed), g = scratch(kTokens * kUsed * kExpertFf),
         u = scratch(kTokens * kUsed * kExpertFf), d = scratch(kTokens * kUsed * kEmbd),
         out = scratch(kTokens * kEmbd);
  RouterShape route;
  route.n_tokens = kTokens;
  route.n_expert = kExpert;
  route.n_used = kUsed;
  ExpertShape up_shape;
  up_shape.n_expert = kExpert;
  up_shape.rows = kExpertFf;
  up_shape.cols = kEmbd;
  up_shape.n_tokens = kTokens;
  up_shape.n_used = kUsed;
  ExpertShape down_shape = up_shape;
  down_shape.rows = kEmbd;
  down_shape.cols = kExpertFf;
  down_shape.x_per_slot = true;
  Recorder r(context);
  r.begin();
  k.matvec(r, gate_inp.type, gate_inp.buffer, bx, logits, kExpert, kEmbd, kTokens);
  k.route(r, logits, nullptr, ids, weights, route);
  k.matvec_experts(r, gate.type, gate.buffer, bx, ids, g, up_shape);
  k.matvec_experts(r, up.type, up.buffer, bx, ids, u, up_shape);
  k.silu_mul(r, g, u, g, kTokens * kUsed * kExpertFf);
  k.matvec_experts(r, down.type, down.buffer, g, ids, d, down_shape);
  k.moe_combine(r, d, weights, out, kEmbd, kUsed, kTokens);
  r.submit_and_wait();
  std::vector<float> got(x.size());
  download(context, out, got.data(), got.size() * 4);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
  }
}

}  // namespace
}  // namespace herd::vulkan
