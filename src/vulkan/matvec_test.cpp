// The matrix-vector shaders against the CPU: for every weight type with a shader, in both
// reduction variants, on random data of several shapes. The error is normalized per output
// by sum_c |w[r][c] * x[c]|, as src/kernels/matmul_test.cpp does, against
// - the float reference (the type table's dequantize, summed in double): the shaders keep
//   activations in f32, so only float rounding differs (bound 1e-5);
// - the CPU's scalar kernel, whose Q8 activations are rounded: the CPU tests' bound for
//   the type against the same float reference.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/matmul.h"
#include "quant/types.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"
#include "vulkan/test_weights.h"

namespace herd::vulkan {
namespace {

struct TypeCase {
  TensorType type;
  double cpu_bound;  // kernels/matmul_test.cpp's bound against the float reference
};
const TypeCase kTypes[] = {
    {TensorType::F32, 1e-6},     {TensorType::F16, 1e-6},    {TensorType::BF16, 3e-3},
    {TensorType::Q4_0, 6e-3},    {TensorType::Q4_1, 6e-3},   {TensorType::Q5_0, 6e-3},
    {TensorType::Q5_1, 6e-3},    {TensorType::Q8_0, 6e-3},   {TensorType::Q2_K, 3e-3},
    {TensorType::Q3_K, 3e-3},    {TensorType::Q4_K, 3e-3},   {TensorType::Q5_K, 3e-3},
    {TensorType::Q6_K, 3e-3},    {TensorType::IQ4_NL, 6e-3}, {TensorType::IQ4_XS, 3e-3},
    {TensorType::MXFP4, 6e-3},   {TensorType::IQ1_S, 3e-3},  {TensorType::IQ1_M, 3e-3},
    {TensorType::IQ2_XXS, 3e-3}, {TensorType::IQ2_XS, 3e-3}, {TensorType::IQ2_S, 3e-3},
    {TensorType::IQ3_XXS, 3e-3}, {TensorType::IQ3_S, 3e-3},
};
constexpr double kBound = 1e-5;

struct Problem {
  std::vector<uint8_t> weights;   // [rows] GGUF rows
  std::vector<float> x;           // [n_tokens][cols]
  std::vector<double> reference;  // [n_tokens][rows]
  std::vector<double> scale;      // [n_tokens][rows]: sum_c |w * x|
};

Problem make_problem(TensorType type, int64_t rows, int64_t cols, uint32_t seed,
                     int64_t n_tokens = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const TypeTraits& traits = type_traits(type);
  const size_t row_size = row_bytes(type, cols);
  Problem p;
  p.weights.resize(row_size * size_t(rows));
  p.x.resize(size_t(n_tokens * cols));
  for (float& v : p.x) v = uniform(rng) * 1.5f;
  std::vector<float> w(static_cast<size_t>(cols));
  std::vector<float> dequantized(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::exp2(float(r % 7) - 3.0f);  // blocks' scales must matter
    for (float& v : w) v = normal(rng) * row_scale * (rng() % 97 == 0 ? 6.0f : 1.0f);
    uint8_t* row = p.weights.data() + size_t(r) * row_size;
    fill_row(type, w.data(), row_scale, rng, row, cols);
    traits.dequantize(row, &dequantized[size_t(r * cols)], cols);
  }
  product_reference(dequantized, p.x, rows, cols, n_tokens, p.reference, p.scale);
  return p;
}

std::vector<float> run_on_device(Context& context, Kernels& kernels, TensorType type,
                                 const Problem& p, int64_t rows, int64_t cols,
                                 int64_t n_tokens = 1) {
  Buffer w(context, p.weights.size(), BufferKind::kDevice, "weights");
  Buffer x(context, p.x.size() * 4, BufferKind::kDevice, "x");
  Buffer y(context, size_t(n_tokens * rows) * 4, BufferKind::kDevice, "y");
  upload(context, w, p.weights.data(), p.weights.size());
  upload(context, x, p.x.data(), p.x.size() * 4);
  Recorder r(context);
  r.begin();
  kernels.matvec(r, type, w, x, y, rows, cols, n_tokens);
  r.submit_and_wait();
  std::vector<float> out(static_cast<size_t>(n_tokens * rows));
  download(context, y, out.data(), out.size() * 4);
  return out;
}

double max_error(const std::vector<float>& y, const std::vector<double>& expected,
                 const std::vector<double>& scale) {
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(y[i]) - expected[i]) / (scale[i] + 1e-30));
  }
  return worst;
}

class VulkanMatvecTest : public testing::TestWithParam<std::tuple<TypeCase, bool>> {};

TEST_P(VulkanMatvecTest, MatchesTheFloatReferenceAndTheScalarKernel) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const auto [type_case, subgroups] = GetParam();
  const TensorType type = type_case.type;
  Kernels& device_kernels = subgroups ? *herd_test_device.kernels : *herd_test_device.shared;
  if (subgroups && !device_kernels.uses_subgroups()) GTEST_SKIP() << "no subgroup arithmetic";
  const int64_t block = type_traits(type).block_size;
  ThreadPool pool(1);
  struct Shape {
    int64_t rows, blocks, n_tokens;
  };
  uint32_t seed = 1;
  for (const Shape s :
       {Shape{1, 1, 1}, Shape{35, 1, 1}, Shape{48, 4, 3}, Shape{301, 8, 1}, Shape{7, 17, 2}}) {
    // Float types get odd widths (f16 rows then start mid-word).
    const int64_t cols = block == 1 ? s.blocks * 37 : s.blocks * block;
    SCOPED_TRACE("rows " + std::to_string(s.rows) + ", cols " + std::to_string(cols) + ", tokens " +
                 std::to_string(s.n_tokens));
    const Problem p = make_problem(type, s.rows, cols, seed++, s.n_tokens);
    const std::vector<float> y =
        run_on_device(context, device_kernels, type, p, s.rows, cols, s.n_tokens);
    EXPECT_LE(max_error(y, p.reference, p.scale), kBound);

    const kernels::PackedMatrix packed =
        kernels::pack_matrix({type, s.rows, cols, p.weights.data()}, kernels::Isa::kScalar);
    kernels::Workspace workspace;
    std::vector<float> cpu(static_cast<size_t>(s.n_tokens * s.rows));
    kernels::matmul(packed, p.x.data(), s.n_tokens, cpu.data(), pool, workspace);
    const std::vector<double> cpu_double(cpu.begin(), cpu.end());
    EXPECT_LE(max_error(y, cpu_double, p.scale), type_case.cpu_bound + kBound);
  }
}

// More rows than one dispatch dimension holds (65535 groups of two rows): the shaders'
// linear group index over x and y.
TEST(VulkanMatvec, RowsBeyondOneDispatchDimension) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t rows = 2 * int64_t(context.limits().maxComputeWorkGroupCount[0]) + 301;
  if (rows > 1'000'000) GTEST_SKIP() << "the device's x limit is large";
  const Problem p = make_problem(TensorType::Q4_0, rows, 32, 99);
  const std::vector<float> y =
      run_on_device(context, *herd_test_device.kernels, TensorType::Q4_0, p, rows, 32);
  EXPECT_LE(max_error(y, p.reference, p.scale), kBound);
}

// The experts of an MoE layer: each token's slots multiply the experts the ids name, with
// the token's x (ffn_gate, ffn_up) or the slot's own (ffn_down).
TEST(VulkanMatvec, ExpertsChosenByIds) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const TensorType types[] = {TensorType::F32,   TensorType::F16,    TensorType::Q4_0,
                              TensorType::Q4_K,  TensorType::IQ4_XS, TensorType::MXFP4,
                              TensorType::IQ3_S, TensorType::IQ2_XXS};
  const int64_t n_expert = 5, rows = 33, n_tokens = 3, n_used = 2;
  const int32_t ids[n_tokens * n_used] = {4, 0, 2, 4, 1, 3};
  uint32_t seed = 7;
  for (const TensorType type : types) {
    const int64_t block = type_traits(type).block_size;
    const int64_t cols = block == 1 ? 37 : 2 * block;
    // n_expert matrices back to back: one problem of n_expert * rows rows.
    const Problem p = make_problem(type, n_expert * rows, cols, seed++);
    std::vector<float> w(size_t(n_expert * rows * cols));
    const size_t row_size = row_bytes(type, cols);
    for (int64_t r = 0; r < n_expert * rows; ++r) {
      type_traits(type).dequantize(p.weights.data() + size_t(r) * row_size, &w[size_t(r * cols)],
                                   cols);
    }
    Buffer bw(context, p.weights.size(), BufferKind::kDevice, "experts");
    upload(context, bw, p.weights.data(), p.weights.size());
    Buffer bids(context, sizeof(ids), BufferKind::kDevice, "ids");
    upload(context, bids, ids, sizeof(ids));
    for (const bool per_slot : {false, true}) {
      for (const bool subgroups : {false, true}) {
        SCOPED_TRACE(std::string(type_traits(type).name) + (per_slot ? ", x per slot" : "") +
                     (subgroups ? ", subgroup" : ", shared"));
        std::mt19937 rng(seed++);
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        std::vector<float> x(size_t((per_slot ? n_tokens * n_used : n_tokens) * cols));
        for (float& v : x) v = uniform(rng);
        std::vector<double> want, scale;  // [n_tokens][n_used][rows]
        expert_reference(w, x, ids, rows, cols, n_tokens, n_used, per_slot, want, scale);
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
        Kernels& k = subgroups ? *herd_test_device.kernels : *herd_test_device.shared;
        Recorder r(context);
        r.begin();
        k.matvec_experts(r, type, bw, bx, bids, by, shape);
        r.submit_and_wait();
        std::vector<float> y(want.size());
        download(context, by, y.data(), y.size() * 4);
        EXPECT_LE(max_error(y, want, scale), kBound);
      }
    }
  }
}

// A real file's weights (the frontier iq3_s model, from llama-quantize): every tensor of a
// grid type, both reduction variants, against the type table's dequantize.
TEST(VulkanMatvec, GridWeightsOfAModelFile) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const std::string path = "../shared/models/frontier/llama-iq3_s.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const gguf::File file = gguf::File::open(path);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  int checked = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (type_traits(t.type).quantize != nullptr || !Kernels::has_matvec(t.type)) continue;
    SCOPED_TRACE(std::string(t.name) + " " + std::string(type_traits(t.type).name));
    const int64_t rows = t.n_rows(), cols = t.shape[0];
    Problem p;
    p.weights.assign(t.data, t.data + t.n_bytes);
    p.x.resize(size_t(cols));
    for (float& v : p.x) v = uniform(rng);
    std::vector<float> w(size_t(rows * cols));
    type_traits(t.type).dequantize(t.data, w.data(), rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, abs_sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        sum += double(w[size_t(r * cols + c)]) * p.x[size_t(c)];
        abs_sum += std::fabs(double(w[size_t(r * cols + c)]) * p.x[size_t(c)]);
      }
      p.reference.push_back(sum);
      p.scale.push_back(abs_sum);
    }
    for (Kernels* k : {herd_test_device.kernels.get(), herd_test_device.shared.get()}) {
      const std::vector<float> y = run_on_device(context, *k, t.type, p, rows, cols);
      EXPECT_LE(max_error(y, p.reference, p.scale), kBound);
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << path << " has no tensor of a grid type";
}

TEST(VulkanMatvec, SaysWhichTypesHaveNoShader) {
  HERD_TEST_VULKAN_CONTEXT(context);
  EXPECT_FALSE(Kernels::has_matvec(TensorType::Q8_1));
  Buffer b(context, 64, BufferKind::kDevice);
  Recorder r(context);
  r.begin();
  try {
    herd_test_device.kernels->matvec(r, TensorType::Q8_1, b, b, b, 1, 256);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_1"), std::string::npos) << e.what();
  }
}

std::string case_name(const testing::TestParamInfo<std::tuple<TypeCase, bool>>& info) {
  return std::string(type_traits(std::get<0>(info.param).type).name) +
         (std::get<1>(info.param) ? "_subgroup" : "_shared");
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanMatvecTest,
                         testing::Combine(testing::ValuesIn(kTypes), testing::Bool()), case_name);

}  // namespace
}  // namespace herd::vulkan
