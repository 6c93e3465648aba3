// The tiled matrix-matrix shaders against the CPU: every weight type with a shader, on
// random data whose rows (96, 130) and tokens (1, 5, 13, 37, 70) are not multiples of the
// tile (64 rows x 8, 16 or 32 tokens), against the float reference (the type table's dequantize,
// summed in double), the error normalized per output by sum_c |w[r][c] * x[t][c]| as
// matvec_test.cpp does. The shader has no reduction across invocations: one variant; the matvec
// path that Kernels::matmul takes for a few tokens is checked in both reduction variants.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "quant/types.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"
#include "vulkan/test_weights.h"

namespace herd::vulkan {
namespace {

const TensorType kTypes[] = {
    TensorType::F32,  TensorType::F16,    TensorType::BF16,   TensorType::Q4_0,
    TensorType::Q4_1, TensorType::Q5_0,   TensorType::Q5_1,   TensorType::Q8_0,
    TensorType::Q2_K, TensorType::Q3_K,   TensorType::Q4_K,   TensorType::Q5_K,
    TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS, TensorType::MXFP4,
};
constexpr double kBound = 1e-5;  // matvec_test.cpp's: f32 activations, float rounding only

struct Problem {
  std::vector<uint8_t> weights;   // [rows] GGUF rows
  std::vector<float> x;           // [n_tokens][cols]
  std::vector<double> reference;  // [n_tokens][rows]
  std::vector<double> scale;      // [n_tokens][rows]: sum_c |w * x|
};

Problem make_problem(TensorType type, int64_t rows, int64_t cols, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.5f, 1.5f);
  const TypeTraits& traits = type_traits(type);
  const size_t row_size = row_bytes(type, cols);
  Problem p;
  p.weights.resize(row_size * size_t(rows));
  p.x.resize(size_t(n_tokens * cols));
  for (float& v : p.x) v = uniform(rng);
  std::vector<float> w(static_cast<size_t>(cols));
  std::vector<float> dequantized(size_t(rows * cols));  // [rows][cols]
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::exp2(float(r % 7) - 3.0f);  // blocks' scales must matter
    for (float& v : w) v = normal(rng) * row_scale;
    uint8_t* row = p.weights.data() + size_t(r) * row_size;
    traits.quantize(w.data(), row, cols);
    traits.dequantize(row, &dequantized[size_t(r * cols)], cols);
  }
  product_reference(dequantized, p.x, rows, cols, n_tokens, p.reference, p.scale);
  return p;
}

// The largest error of the device's matmul against the reference, normalized.
double device_error(Context& context, Kernels& kernels, TensorType type, const Problem& p,
                    int64_t rows, int64_t cols, int64_t n_tokens) {
  Buffer w(context, p.weights.size(), BufferKind::kDevice, "weights");
  Buffer x(context, p.x.size() * 4, BufferKind::kDevice, "x");
  Buffer y(context, size_t(n_tokens * rows) * 4, BufferKind::kDevice, "y");
  upload(context, w, p.weights.data(), p.weights.size());
  upload(context, x, p.x.data(), p.x.size() * 4);
  Recorder r(context);
  r.begin();
  kernels.matmul(r, type, w, x, y, rows, cols, n_tokens);
  r.submit_and_wait();
  std::vector<float> out(size_t(n_tokens * rows));
  download(context, y, out.data(), out.size() * 4);
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(out[i]) - p.reference[i]) / (p.scale[i] + 1e-30));
  }
  return worst;
}

// Columns: one K-quant super-block (8 column steps), three legacy blocks, or an odd width for the
// float types (f16 rows then start mid-word, and the last column step is partial).
int64_t test_cols(TensorType type) {
  const int64_t block = type_traits(type).block_size;
  return block == 1 ? 45 : block == 256 ? 256 : 3 * block;
}

// Kernels that always take the tiled shader, even for one token.
Kernels& tiled_kernels(Context& context) {
  static Kernels tiled(context, KernelOptions{.matmul_min_tokens = 1});
  return tiled;
}

class VulkanMatmulTest : public testing::TestWithParam<TensorType> {};

TEST_P(VulkanMatmulTest, TilesMatchTheFloatReference) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const TensorType type = GetParam();
  Kernels& tiled = tiled_kernels(context);
  const int64_t cols = test_cols(type);
  struct Shape {
    int64_t rows, n_tokens;
  };
  std::vector<Shape> shapes = {{96, 1}, {130, 5}, {96, 37}, {130, 70}};
  // The 16-token tile's pipelines for a few types only: the decoding is the same in every
  // tile, and each pipeline takes lavapipe a second to compile.
  if (type == TensorType::F16 || type == TensorType::Q4_0 || type == TensorType::Q6_K) {
    shapes.push_back({130, 13});
  }
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", cols " + std::to_string(cols) + ", tokens " +
                 std::to_string(s.n_tokens));
    const Problem p = make_problem(type, s.rows, cols, s.n_tokens, seed++);
    EXPECT_LE(device_error(context, tiled, type, p, s.rows, cols, s.n_tokens), kBound);
  }
}

std::string type_name(const testing::TestParamInfo<TensorType>& info) {
  return std::string(type_traits(info.param).name);
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanMatmulTest, testing::ValuesIn(kTypes), type_name);

// The default choice: a few tokens through matvec (both reduction variants), more through
// the tiles; the same answers either way.
TEST(VulkanMatmul, FewTokensGoThroughMatvec) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const TensorType type = TensorType::Q4_K;
  const int64_t rows = 70, cols = 256;
  for (const bool subgroups : {false, true}) {
    Kernels& kernels = subgroups ? *herd_test_device.kernels : *herd_test_device.shared;
    if (subgroups && !kernels.uses_subgroups()) continue;
    for (const int64_t n_tokens : {int64_t(1), KernelOptions{}.matmul_min_tokens - 1,
                                   KernelOptions{}.matmul_min_tokens, int64_t(33)}) {
      SCOPED_TRACE(std::string(subgroups ? "subgroup" : "shared") + ", tokens " +
                   std::to_string(n_tokens));
      const Problem p = make_problem(type, rows, cols, n_tokens, uint32_t(100 + n_tokens));
      EXPECT_LE(device_error(context, kernels, type, p, rows, cols, n_tokens), kBound);
    }
  }
}

// The experts of an MoE layer: each token's slots multiply the experts the ids name, with
// the token's x (ffn_gate, ffn_up) or the slot's own (ffn_down). 300 tokens: 600 slots,
// more than the shader's window of 512 ids.
TEST(VulkanMatmul, ExpertsChosenByIds) {
  HERD_TEST_VULKAN_CONTEXT(context);
  struct Case {
    TensorType type;
    int64_t n_tokens;
  };
  const Case cases[] = {{TensorType::F32, 37},  {TensorType::F16, 37},    {TensorType::Q4_0, 300},
                        {TensorType::Q4_K, 37}, {TensorType::IQ4_XS, 37}, {TensorType::MXFP4, 37}};
  const int64_t n_expert = 5, rows = 70, n_used = 2;
  uint32_t seed = 7;
  for (const Case& k : cases) {
    const TensorType type = k.type;
    const int64_t n_tokens = k.n_tokens, cols = test_cols(type);
    std::mt19937 rng(seed++);
    std::vector<int32_t> ids(size_t(n_tokens * n_used));  // [n_tokens][n_used], distinct per token
    for (int64_t t = 0; t < n_tokens; ++t) {
      ids[size_t(t * n_used)] = int32_t(rng() % n_expert);
      ids[size_t(t * n_used + 1)] =
          int32_t((ids[size_t(t * n_used)] + 1 + rng() % (n_expert - 1)) % n_expert);
    }
    // n_expert matrices back to back: one problem of n_expert * rows rows (its x unused).
    const Problem p = make_problem(type, n_expert * rows, cols, 1, seed++);
    std::vector<float> w(size_t(n_expert * rows * cols));  // [n_expert * rows][cols]
    const size_t row_size = row_bytes(type, cols);
    for (int64_t r = 0; r < n_expert * rows; ++r) {
      type_traits(type).dequantize(p.weights.data() + size_t(r) * row_size, &w[size_t(r * cols)],
                                   cols);
    }
    Buffer bw(context, p.weights.size(), BufferKind::kDevice, "experts");
    upload(context, bw, p.weights.data(), p.weights.size());
    Buffer bids(context, ids.size() * 4, BufferKind::kDevice, "ids");
    upload(context, bids, ids.data(), ids.size() * 4);
    for (const bool per_slot : {false, true}) {
      SCOPED_TRACE(std::string(type_traits(type).name) + (per_slot ? ", x per slot" : ""));
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      std::vector<float> x(size_t((per_slot ? n_tokens * n_used : n_tokens) * cols));
      for (float& v : x) v = uniform(rng);
      std::vector<double> want, scale;  // [n_tokens][n_used][rows]
      expert_reference(w, x, ids.data(), rows, cols, n_tokens, n_used, per_slot, want, scale);
      Buffer bx(context, x.size() * 4, BufferKind::kDevice, "x");
      upload(context, bx, x.data(), x.size() * 4);
      Buffer by(context, want.size() * 4, BufferKind::kDevice, "y");
      ExpertShape shape;
      shape.n_expert = n_expert;
      shape.rows = rows;
      shape.cols = cols;
      shape.n_tokens = n_tokens;
      shape.n_used = n_used;
      shape.x_per_slot = per_slot;
      Recorder r(context);
      r.begin();
      tiled_kernels(context).matmul_experts(r, type, bw, bx, bids, by, shape);
      r.submit_and_wait();
      std::vector<float> y(want.size());
      download(context, by, y.data(), y.size() * 4);
      double worst = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        if (!std::isfinite(y[i])) worst = INFINITY;
        worst = std::max(worst, std::fabs(double(y[i]) - want[i]) / (scale[i] + 1e-30));
      }
      EXPECT_LE(worst, kBound);
    }
  }
}

TEST(VulkanMatmul, SaysWhichTypesHaveNoShader) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Buffer b(context, 64, BufferKind::kDevice);
  Recorder r(context);
  r.begin();
  try {
    herd_test_device.kernels->matmul(r, TensorType::Q8_1, b, b, b, 1, 256, 64);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace herd::vulkan
