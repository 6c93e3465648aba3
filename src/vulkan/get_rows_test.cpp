// The row gather (token embeddings) against the type table's dequantize, for every type the
// matvec shaders read: the same floats.
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

TEST(VulkanGetRows, MatchesTheTypeTablesDequantize) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const TensorType types[] = {
      TensorType::F32,   TensorType::F16,     TensorType::BF16,    TensorType::Q4_0,
      TensorType::Q4_1,  TensorType::Q5_0,    TensorType::Q5_1,    TensorType::Q8_0,
      TensorType::Q2_K,  TensorType::Q3_K,    TensorType::Q4_K,    TensorType::Q5_K,
      TensorType::Q6_K,  TensorType::IQ4_NL,  TensorType::IQ4_XS,  TensorType::MXFP4,
      TensorType::IQ1_S, TensorType::IQ1_M,   TensorType::IQ2_XXS, TensorType::IQ2_XS,
      TensorType::IQ2_S, TensorType::IQ3_XXS, TensorType::IQ3_S,
  };
  const int64_t rows = 10;
  const int32_t ids[] = {3, 0, 9, 3, 7};
  const int64_t n_tokens = 5;
  uint32_t seed = 1;
  for (const TensorType type : types) {
    SCOPED_TRACE(std::string(type_traits(type).name));
    const int64_t block = type_traits(type).block_size;
    const int64_t cols = block == 1 ? 75 : 2 * block;
    std::mt19937 rng(seed++);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(size_t(rows * cols));
    for (float& v : w) v = normal(rng);
    const size_t row_size = row_bytes(type, cols);
    std::vector<uint8_t> bytes(row_size * size_t(rows));
    std::vector<float> dequantized(w.size());
    for (int64_t r = 0; r < rows; ++r) {
      fill_row(type, &w[size_t(r * cols)], 1.0f, rng, &bytes[size_t(r) * row_size], cols);
      type_traits(type).dequantize(&bytes[size_t(r) * row_size], &dequantized[size_t(r * cols)],
                                   cols);
    }
    Buffer bw(context, bytes.size(), BufferKind::kDevice, "weights");
    Buffer bids(context, sizeof(ids), BufferKind::kDevice, "ids");
    Buffer out(context, size_t(n_tokens * cols) * 4, BufferKind::kDevice, "rows");
    upload(context, bw, bytes.data(), bytes.size());
    upload(context, bids, ids, sizeof(ids));
    Recorder r(context);
    r.begin();
    herd_test_device.kernels->get_rows(r, type, bw, bids, out, cols, n_tokens);
    r.submit_and_wait();
    std::vector<float> got(size_t(n_tokens * cols));
    download(context, out, got.data(), got.size() * 4);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t c = 0; c < cols; ++c) {
        const float want = dequantized[size_t(ids[t] * cols + c)];
        ASSERT_NEAR(got[size_t(t * cols + c)], want, 1e-6 * (1 + std::fabs(want)))
            << "token " << t << ", column " << c;
      }
    }
  }
}

}  // namespace
}  // namespace herd::vulkan
