// One harness over (weight type x ISA): matmul against a float reference computed from the
// type table's dequantize, and every SIMD ISA against the scalar kernels, on random data.
// The error is normalized per output by sum_c |w[r][c] * x[t][c]|, so one bound per type
// holds for any shape: tight where only float rounding differs, looser where activations
// are rounded to 8 bits (an activation's rounding error is at most half a step, a step
// being 1/127 of its block's largest magnitude).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "quant/float16.h"
#include "quant/random_blocks.h"
#include "util/error.h"

namespace herd::kernels {
namespace {

struct TypeCase {
  TensorType type;
  double bound;       // max normalized error against the float reference
  double simd_bound;  // max normalized error of a SIMD ISA against the scalar kernels
};

// Where the bounds come from: f32/f16 weights are exact in f32 and activations stay f32, so
// only summation order differs; bf16 rounds activations to 8 mantissa bits (2^-9 relative);
// Q8 activations round to 1/254 of a block's largest magnitude at worst (measured on
// these shapes: legacy ~3e-3, whose blocks are short, K-quants ~1e-3).
// Against scalar, SIMD kernels see bit-identical int8 activations (activations_test.cpp)
// and exact integer block sums, so only float rounding differs (measured <= 7e-8), except
// q4_1/q5_1: ggml's Q8_1 rounds the block sum s to f16, the SIMD blocks keep it exact
// (measured 1.4e-3).
const TypeCase kTypes[] = {
    {TensorType::F32, 1e-6, 1e-6},
    {TensorType::F16, 1e-6, 1e-6},
    {TensorType::BF16, 3e-3, 1e-6},
    {TensorType::Q4_0, 6e-3, 1e-6},
    {TensorType::Q4_1, 6e-3, 3e-3},
    {TensorType::Q5_0, 6e-3, 1e-6},
    {TensorType::Q5_1, 6e-3, 3e-3},
    {TensorType::Q8_0, 6e-3, 1e-6},
    {TensorType::Q2_K, 3e-3, 1e-6},
    {TensorType::Q3_K, 3e-3, 1e-6},
    {TensorType::Q4_K, 3e-3, 1e-6},
    {TensorType::Q5_K, 3e-3, 1e-6},
    {TensorType::Q6_K, 3e-3, 1e-6},
    // Grid types (random blocks, see random_blocks): Q8_K activations as the K-quants.
    {TensorType::IQ2_XXS, 3e-3, 1e-6},
    {TensorType::IQ2_XS, 3e-3, 1e-6},
    {TensorType::IQ2_S, 3e-3, 1e-6},
    {TensorType::IQ3_XXS, 3e-3, 1e-6},
    {TensorType::IQ3_S, 3e-3, 1e-6},
    {TensorType::IQ1_S, 3e-3, 1e-6},
    {TensorType::IQ1_M, 3e-3, 1e-6},
    // Non-linear 4-bit types: levels as integers, Q8_0 (Q8_K for iq4_xs) activations.
    {TensorType::IQ4_NL, 6e-3, 1e-6},
    {TensorType::IQ4_XS, 3e-3, 1e-6},
    {TensorType::MXFP4, 6e-3, 1e-6},
};

const Isa kIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon};

struct Shape {
  int64_t n_tokens, rows, blocks;  // cols = blocks * block size (float types: see cols())
};

int64_t cols_of(TensorType type, int64_t blocks) {
  const int64_t block_size = type_traits(type).block_size;
  // Float types get widths that are not a multiple of any vector width.
  return block_size == 1 ? blocks * 37 : blocks * block_size;
}

struct Problem {
  std::vector<uint8_t> weights;    // [rows] GGUF rows
  std::vector<float> dequantized;  // [rows][cols]
  std::vector<float> x;            // [n_tokens][cols]
  std::vector<double> reference;   // [n_tokens][rows]
  std::vector<double> scale;       // [n_tokens][rows]: sum_c |w * x|
};

Problem make_problem(TensorType type, int64_t n_tokens, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Problem p;
  const TypeTraits& traits = type_traits(type);
  std::vector<float> w(size_t(rows * cols));
  // Rows of different magnitudes, some outliers: the scales of blocks must matter.
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::exp2(float(r % 7) - 3.0f);
    for (int64_t c = 0; c < cols; ++c) {
      float v = normal(rng) * row_scale;
      if (rng() % 97 == 0) v *= 6.0f;
      w[size_t(r * cols + c)] = v;
    }
  }
  const size_t row_size = row_bytes(type, cols);
  p.weights.resize(row_size * size_t(rows));
  p.dequantized.resize(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    if (traits.quantize == nullptr) {
      random_blocks(type, std::exp2(float(r % 7) - 3.0f), rng,
                    p.weights.data() + size_t(r) * row_size, cols / traits.block_size);
    } else {
      traits.quantize(&w[size_t(r * cols)], p.weights.data() + size_t(r) * row_size, cols);
    }
    traits.dequantize(p.weights.data() + size_t(r) * row_size, &p.dequantized[size_t(r * cols)],
                      cols);
  }
  p.x.resize(size_t(n_tokens * cols));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float token_scale = 0.5f + float(t % 3);
    for (int64_t c = 0; c < cols; ++c) p.x[size_t(t * cols + c)] = uniform(rng) * token_scale;
  }
  p.reference.resize(size_t(n_tokens * rows));
  p.scale.resize(size_t(n_tokens * rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, abs_sum = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double product =
            double(p.dequantized[size_t(r * cols + c)]) * p.x[size_t(t * cols + c)];
        sum += product;
        abs_sum += std::fabs(product);
      }
      p.reference[size_t(t * rows + r)] = sum;
      p.scale[size_t(t * rows + r)] = abs_sum;
    }
  }
  return p;
}

std::vector<float> run_matmul(const Problem& p, TensorType type, Isa isa, int64_t n_tokens,
                              int64_t rows, int64_t cols, ThreadPool& pool) {
  const PackedMatrix packed = pack_matrix({type, rows, cols, p.weights.data()}, isa);
  EXPECT_EQ(packed.type(), type);
  EXPECT_EQ(packed.rows(), rows);
  EXPECT_EQ(packed.cols(), cols);
  Workspace workspace;
  std::vector<float> y(size_t(n_tokens * rows), NAN);
  matmul(packed, p.x.data(), n_tokens, y.data(), pool, workspace);
  return y;
}

// The largest normalized error of y against `expected` (scaled by p.scale).
template <typename T>
double max_error(const std::vector<float>& y, const std::vector<T>& expected, const Problem& p) {
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return INFINITY;
    const double error = std::fabs(double(y[i]) - double(expected[i])) / (p.scale[i] + 1e-30);
    worst = std::max(worst, error);
  }
  return worst;
}

std::string case_name(const testing::TestParamInfo<std::tuple<TypeCase, Isa>>& info) {
  return std::string(type_traits(std::get<0>(info.param).type).name) + "_" +
         std::string(isa_name(std::get<1>(info.param)));
}

class MatmulTest : public testing::TestWithParam<std::tuple<TypeCase, Isa>> {};

TEST_P(MatmulTest, MatchesReferenceAndScalar) {
  const auto [type_case, isa] = GetParam();
  const TensorType type = type_case.type;
  if (best_isa(detect_cpu(), isa) != isa) {
    GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  }
  const MatmulKernel* kernel = find_matmul_kernel(type, isa);
  ASSERT_NE(kernel, nullptr);
  if (kernel->isa != isa) {
    std::printf("%s has no %s kernel: testing the %s fallback\n",
                std::string(type_traits(type).name).c_str(), std::string(isa_name(isa)).c_str(),
                std::string(isa_name(kernel->isa)).c_str());
  }
  ThreadPool pool(2);
  const Shape shapes[] = {
      {1, 1, 1}, {1, 35, 1}, {3, 35, 4}, {17, 48, 2}, {64, 80, 4}, {1, 300, 8}, {5, 16, 3},
  };
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    const int64_t cols = cols_of(type, s.blocks);
    SCOPED_TRACE("n_tokens " + std::to_string(s.n_tokens) + ", rows " + std::to_string(s.rows) +
                 ", cols " + std::to_string(cols));
    const Problem p = make_problem(type, s.n_tokens, s.rows, cols, seed++);
    const std::vector<float> y = run_matmul(p, type, isa, s.n_tokens, s.rows, cols, pool);
    EXPECT_LE(max_error(y, p.reference, p), type_case.bound);
    if (isa != Isa::kScalar) {
      const std::vector<float> y_scalar =
          run_matmul(p, type, Isa::kScalar, s.n_tokens, s.rows, cols, pool);
      EXPECT_LE(max_error(y, y_scalar, p), type_case.simd_bound);
    }
  }
}

// Batched decode: every token count a tile can end on (1..17: one 8-token tile of AVX-512
// plus a remainder, four 4-token tiles of AVX2 plus one, ...), with odd row counts (a
// partial last panel) and enough panels that the tiles' prefetches run past the end of
// the matrix.
TEST_P(MatmulTest, SmallTokenCountsMatchScalar) {
  const auto [type_case, isa] = GetParam();
  const TensorType type = type_case.type;
  if (best_isa(detect_cpu(), isa) != isa) {
    GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  }
  ThreadPool pool(2);
  const int64_t rows_of[] = {37, 51, 19};
  for (int64_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
    const int64_t rows = rows_of[n_tokens % 3];
    const int64_t cols = cols_of(type, 2 + n_tokens % 2);
    SCOPED_TRACE("n_tokens " + std::to_string(n_tokens) + ", rows " + std::to_string(rows) +
                 ", cols " + std::to_string(cols));
    const Problem p = make_problem(type, n_tokens, rows, cols, uint32_t(200 + n_tokens));
    const std::vector<float> y = run_matmul(p, type, isa, n_tokens, rows, cols, pool);
    EXPECT_LE(max_error(y, p.reference, p), type_case.bound);
    if (isa != Isa::kScalar) {
      const std::vector<float> y_scalar =
          run_matmul(p, type, Isa::kScalar, n_tokens, rows, cols, pool);
      EXPECT_LE(max_error(y, y_scalar, p), type_case.simd_bound);
    }
  }
}

// Speculative decoding verifies k + 1 tokens in one forward and must give what k + 1
// one-token forwards give: a token's outputs may not depend on how many tokens share the
// call, down to the last bit (a near tie between two logits would flip otherwise). So N
// tokens at once equal N calls of one token, for every N a tile can end on, with odd
// block counts and row counts (a partial last panel).
TEST_P(MatmulTest, TokenCountDoesNotChangeAToken) {
  const auto [type_case, isa] = GetParam();
  const TensorType type = type_case.type;
  if (best_isa(detect_cpu(), isa) != isa) {
    GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  }
  ThreadPool pool(2);
  const int64_t rows_of[] = {19, 13, 23};
  for (int64_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
    const int64_t rows = rows_of[n_tokens % 3];
    const int64_t cols = cols_of(type, n_tokens % 2 == 0 ? 3 : 1);
    SCOPED_TRACE("n_tokens " + std::to_string(n_tokens) + ", rows " + std::to_string(rows) +
                 ", cols " + std::to_string(cols));
    const Problem p = make_problem(type, n_tokens, rows, cols, uint32_t(300 + n_tokens));
    const PackedMatrix packed = pack_matrix({type, rows, cols, p.weights.data()}, isa);
    Workspace workspace;
    std::vector<float> together(size_t(n_tokens * rows), NAN), alone(size_t(rows), NAN);
    matmul(packed, p.x.data(), n_tokens, together.data(), pool, workspace);
    for (int64_t t = 0; t < n_tokens; ++t) {
      matmul(packed, p.x.data() + t * cols, 1, alone.data(), pool, workspace);
      for (int64_t r = 0; r < rows; ++r) {
        const float y = together[size_t(t * rows + r)];
        ASSERT_EQ(std::memcmp(&y, &alone[size_t(r)], sizeof(float)), 0)
            << "token " << t << ", row " << r << ": " << y << " against " << alone[size_t(r)];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TypesAndIsas, MatmulTest,
                         testing::Combine(testing::ValuesIn(kTypes), testing::ValuesIn(kIsas)),
                         case_name);

// The same matrix in one pool of 1 and one of 3 threads: the work split must not change
// a single bit of the result (every output is computed by one kernel call either way).
TEST(Matmul, ThreadCountDoesNotChangeResults) {
  const Isa isa = best_isa(detect_cpu());
  for (TensorType type : {TensorType::Q4_0, TensorType::Q4_K, TensorType::F16}) {
    const int64_t cols = cols_of(type, 8), rows = 100, n_tokens = 9;
    const Problem p = make_problem(type, n_tokens, rows, cols, 42);
    ThreadPool one(1), three(3);
    EXPECT_EQ(run_matmul(p, type, isa, n_tokens, rows, cols, one),
              run_matmul(p, type, isa, n_tokens, rows, cols, three))
        << type_traits(type).name;
  }
}

// matmul_batch must give what separate matmul calls give, bit for bit, whether the jobs
// share an activation format (q4_K and q6_K read Q8_K blocks) or not (q4_0, f16).
TEST(Matmul, BatchEqualsSeparateProducts) {
  const Isa isa = best_isa(detect_cpu());
  const int64_t cols = 512, n_tokens = 5;
  const TensorType types[] = {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q4_0,
                              TensorType::F16};
  const int64_t rows[] = {64, 35, 128, 17};
  std::vector<Problem> problems;
  std::vector<PackedMatrix> packed;
  for (size_t i = 0; i < 4; ++i) {
    problems.push_back(make_problem(types[i], n_tokens, rows[i], cols, uint32_t(100 + i)));
    packed.push_back(pack_matrix({types[i], rows[i], cols, problems[i].weights.data()}, isa));
  }
  const std::vector<float>& x = problems[0].x;  // every job multiplies the same activations
  ThreadPool pool(2);
  Workspace workspace;
  std::vector<std::vector<float>> batched(4), separate(4);
  std::vector<MatmulJob> jobs;
  for (size_t i = 0; i < 4; ++i) {
    batched[i].assign(size_t(n_tokens * rows[i]), NAN);
    separate[i].assign(size_t(n_tokens * rows[i]), NAN);
    jobs.push_back({&packed[i], batched[i].data()});
    matmul(packed[i], x.data(), n_tokens, separate[i].data(), pool, workspace);
  }
  matmul_batch(jobs, x.data(), n_tokens, pool, workspace);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(batched[i], separate[i]) << type_traits(types[i]).name;
}

TEST(Matmul, UnsupportedTypesAreErrors) {
  const std::vector<uint8_t> bytes(4096);
  for (TensorType type : {TensorType::Q8_K, TensorType::I32, TensorType::F64}) {
    EXPECT_THROW(pack_matrix({type, 2, 256, bytes.data()}, Isa::kScalar), Error);
  }
  // A width that is not a whole number of blocks.
  EXPECT_THROW(pack_matrix({TensorType::Q4_0, 2, 48, bytes.data()}, Isa::kScalar), Error);
}

TEST(Matmul, ZeroTokensIsANoOp) {
  const std::vector<uint8_t> bytes(row_bytes(TensorType::Q4_0, 64) * 2);
  const PackedMatrix packed = pack_matrix({TensorType::Q4_0, 2, 64, bytes.data()}, Isa::kScalar);
  ThreadPool pool(1);
  Workspace workspace;
  matmul(packed, nullptr, 0, nullptr, pool, workspace);
}

TEST(Cpu, BestIsaRespectsLimitAndFeatures) {
  const CpuFeatures cpu = detect_cpu();
  EXPECT_EQ(best_isa(cpu, Isa::kScalar), Isa::kScalar);
  EXPECT_EQ(best_isa(CpuFeatures{}), Isa::kScalar);
  CpuFeatures avx2_only;
  avx2_only.avx2 = avx2_only.fma = avx2_only.f16c = true;
  const Isa with_avx2 = best_isa(avx2_only);
  EXPECT_TRUE(with_avx2 == Isa::kAvx2 || with_avx2 == Isa::kScalar);  // scalar on arm64
  std::printf("cpu: best isa %s\n", std::string(isa_name(best_isa(cpu))).c_str());
}

TEST(Workspace, GivesAlignedMemory) {
  Workspace workspace;
  for (size_t bytes : {1, 100, 5000, 3}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(workspace.get(bytes)) % 64, 0u);
  }
}

}  // namespace
}  // namespace herd::kernels
