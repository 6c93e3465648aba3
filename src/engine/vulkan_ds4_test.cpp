// DeepSeek V4 on a Vulkan device (vulkan_ds4.cpp) beyond the reference logits, which
// vulkan_backend_test.cpp's VulkanReferenceLogits checks: snapshots of a slot, sequences
// sharing a batch, and the first layers on the device beside the CPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/reference_check.h"
#include "util/error.h"
#include "vulkan/test_device.h"

namespace herd::engine {
namespace {

std::string test_device_name() {
  const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
  return std::string("vulkan:") + (index != nullptr ? index : "0");
}

// DeepSeek V4's state on the device is every position's rows: a slot continues from a
// snapshot (the scheduler's prefix reuse) as it did the first time, and a batch that does
// not continue its slot is refused as on the CPU.
TEST(VulkanBackend, CompressedAttentionContinuesFromASnapshot) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  LocalOptions options;
  options.n_ctx = 64;
  options.device = test_device_name();
  auto runner = LocalRunner::open("../shared/models/frontier2/deepseek4-f32.gguf", options);
  const std::vector<int32_t> tokens =
      read_tokens("../shared/models/frontier2/deepseek4-f32.1.tokens");
  auto run = [&](int32_t from, int32_t to) {
    std::vector<float> all, logits;
    for (int32_t p0 = from; p0 < to; p0 += 3) {
      Batch batch;
      for (int32_t p = p0; p < std::min(to, p0 + 3); ++p) batch.add(tokens[size_t(p)], 0, p, true);
      runner->forward(batch, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  run(0, 21);
  runner->save_state(0, 21);
  const std::vector<float> first = run(21, 40);
  EXPECT_EQ(runner->restore_state(0, 30), 21);
  const std::vector<float> again = run(21, 40);
  ASSERT_EQ(again.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) ASSERT_NEAR(again[i], first[i], 1e-5) << i;
  Batch skipping;
  skipping.add(tokens[0], 0, 45, true);
  std::vector<float> logits;
  EXPECT_THROW(runner->forward(skipping, logits), Error);
}

// Two sequences' tokens interleaved in batches give the logits each gives alone: the
// compressors' rows and entries, the indexer's choice and the window are each token's own
// slot's.
TEST(VulkanBackend, CompressedAttentionSequencesSharingABatch) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  LocalOptions options;
  options.n_ctx = 64;
  options.n_seq = 2;
  options.device = test_device_name();
  auto runner = LocalRunner::open("../shared/models/frontier2/deepseek4-f32.gguf", options);
  const std::string base = "../shared/models/frontier2/deepseek4-f32.";
  const std::vector<int32_t> a = read_tokens(base + "1.tokens"), b = read_tokens(base + "2.tokens");
  const int64_t n_vocab = runner->hparams().n_vocab;
  std::vector<float> logits;
  // Alone: a in slot 0, then b in slot 1, one token per forward.
  const std::vector<float> want_a = token_by_token(*runner, a, 0),
                           want_b = token_by_token(*runner, b, 1);
  // Both slots start again at 0: per batch 3 positions of a and 1 of b, interleaved.
  std::vector<float> got_a, got_b;
  for (size_t k = 0; 3 * k < a.size(); ++k) {
    Batch batch;
    std::vector<std::vector<float>*> rows;
    for (size_t i = 3 * k; i < std::min(a.size(), 3 * k + 3); ++i) {
      batch.add(a[i], 0, int32_t(i), true);
      rows.push_back(&got_a);
      if (i == 3 * k && k < b.size()) {
        batch.add(b[k], 1, int32_t(k), true);
        rows.push_back(&got_b);
      }
    }
    runner->forward(batch, logits);
    for (size_t r = 0; r < rows.size(); ++r) {
      rows[r]->insert(rows[r]->end(), logits.begin() + int64_t(r) * n_vocab,
                      logits.begin() + int64_t(r + 1) * n_vocab);
    }
  }
  ASSERT_EQ(got_a.size(), want_a.size());
  ASSERT_EQ(got_b.size(), want_b.size());
  for (size_t i = 0; i < got_a.size(); ++i) ASSERT_NEAR(got_a[i], want_a[i], 1e-4) << i;
  for (size_t i = 0; i < got_b.size(); ++i) ASSERT_NEAR(got_b[i], want_b[i], 1e-4) << i;
}

// DeepSeek V4's first two layers on the device, the rest and the head on the CPU: the
// residual streams ([n][n_hc][n_embd]) cross between the stages.
TEST(VulkanBackend, CompressedAttentionFirstLayersOnTheDevice) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  Case c{2, 256, kernels::best_isa(kernels::detect_cpu()), -1, test_device_name()};
  c.device_layers = 2;
  LocalOptions options;
  options.n_ctx = 64;
  options.device = c.device;
  options.device_layers = c.device_layers;
  auto runner = LocalRunner::open("../shared/models/frontier2/deepseek4-f32.gguf", options);
  EXPECT_NE(runner->describe().find("the rest on the CPU"), std::string::npos);
  check_model("models/frontier2/deepseek4-f32", c);
}

}  // namespace
}  // namespace herd::engine
