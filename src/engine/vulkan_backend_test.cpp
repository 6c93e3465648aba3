// The forward pass on a Vulkan device (lavapipe here) against the reference logits: every
// shared reference model the Vulkan backend can run, whole sequences, chunks of 8 and token by
// token (the decode path); several sequences in one batch; the models it cannot run yet
// refused with the capability named, and `--device auto`'s choice.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>

#include "engine/backend.h"
#include "engine/reference_check.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/error.h"
#include "vulkan/test_device.h"

namespace herd::engine {
namespace {

std::string test_device_name() {
  const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
  return std::string("vulkan:") + (index != nullptr ? index : "0");
}

ModelInfo info_of(const std::string& model) {
  const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
  return read_model_info(file);
}

// The reference models whose capabilities the Vulkan backend has, and the others.
std::vector<std::string> models_where(bool supported) {
  std::vector<std::string> names;
  for (const std::string& model : model_names()) {
    const ModelInfo info = info_of(model);
    if (vulkan_unsupported(*info.arch, info.hp, false).empty() == supported) {
      names.push_back(model);
    }
  }
  return names;
}

class VulkanReferenceLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(VulkanReferenceLogits, WholeChunkedAndTokenByToken) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::string device = test_device_name();
  check_model(GetParam(), {1, 256, kernels::Isa::kScalar, -1, device});
  check_model(GetParam(), {1, 1, kernels::Isa::kScalar, -1, device});
  // Chunks after the first start past position 0 with several tokens (the attention's
  // causal mask from pos0, windows across a chunk): one model of each kind of layer.
  const std::string& m = GetParam();
  if (m.ends_with("gemma3-f32") || m.ends_with("gpt-oss-f32") || m.ends_with("qwen3moe-f32") ||
      m.ends_with("llama-q4_0")) {
    check_model(GetParam(), {1, 8, kernels::Isa::kScalar, -1, device});
  }
}

// Two sequences in one batch, their tokens interleaved, give the logits each gives alone:
// attention reads each token's own slot, in runs of the batch.
TEST(VulkanBackend, SequencesSharingABatchKeepTheirOwnCache) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  LocalOptions options;
  options.n_ctx = 64;
  options.n_seq = 2;
  options.device = test_device_name();
  auto runner = LocalRunner::open("../shared/models/qwen3-f32.gguf", options);
  const std::vector<int32_t> a = read_tokens("../shared/models/qwen3-f32.1.tokens");
  const std::vector<int32_t> b = read_tokens("../shared/models/qwen3-f32.2.tokens");
  // Alone: a in slot 0, then b in slot 1, one token per forward.
  auto alone = [&](const std::vector<int32_t>& tokens, int32_t seq) {
    std::vector<float> all, logits;
    for (size_t i = 0; i < tokens.size(); ++i) {
      Batch batch;
      batch.add(tokens[i], seq, int32_t(i), true);
      runner->forward(batch, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  const std::vector<float> want_a = alone(a, 0), want_b = alone(b, 1);
  // Together: prefixes of 3 and 5 tokens in one batch, then a step of each per batch.
  const int64_t n_vocab = runner->hparams().n_vocab;
  std::vector<float> got_a, got_b, logits;
  Batch first;
  for (int32_t i = 0; i < 5; ++i) {
    if (i < 3) first.add(a[size_t(i)], 0, i, true);
    first.add(b[size_t(i)], 1, i, true);
  }
  runner->forward(first, logits);
  // Rows in batch order: a0 b0 a1 b1 a2 b2 b3 b4.
  for (int64_t row = 0; row < first.size(); ++row) {
    auto& got = first.seq[size_t(row)] == 0 ? got_a : got_b;
    got.insert(got.end(), logits.begin() + row * n_vocab, logits.begin() + (row + 1) * n_vocab);
  }
  // Then a step of each per batch, b first (b runs two positions ahead of a).
  for (int32_t i = 3; i < int32_t(a.size()) && i + 2 < int32_t(b.size()); ++i) {
    Batch step;
    step.add(b[size_t(i + 2)], 1, i + 2, true);
    step.add(a[size_t(i)], 0, i, true);
    runner->forward(step, logits);
    got_b.insert(got_b.end(), logits.begin(), logits.begin() + n_vocab);
    got_a.insert(got_a.end(), logits.begin() + n_vocab, logits.end());
  }
  ASSERT_GE(got_a.size(), size_t(5 * n_vocab));
  ASSERT_GE(got_b.size(), size_t(7 * n_vocab));
  for (size_t i = 0; i < got_a.size(); ++i) {
    ASSERT_NEAR(got_a[i], want_a[i], 1e-3 * (1 + std::fabs(want_a[i]))) << i;
  }
  for (size_t i = 0; i < got_b.size(); ++i) {
    ASSERT_NEAR(got_b[i], want_b[i], 1e-3 * (1 + std::fabs(want_b[i]))) << i;
  }
}

// A model the Vulkan backend cannot run yet is refused with the capability named; auto
// leaves it on the CPU (lavapipe is a CPU driver: auto never picks it).
TEST(VulkanBackend, ModelsItCannotRunAreRefusedByName) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const std::vector<std::string> others = models_where(false);
  ASSERT_FALSE(others.empty());
  for (const std::string& model : others) {
    SCOPED_TRACE(model);
    const ModelInfo info = info_of(model);
    const std::string missing = vulkan_unsupported(*info.arch, info.hp, false);
    LocalOptions options;
    options.n_ctx = 64;
    options.device = test_device_name();
    try {
      LocalRunner::open("../shared/" + model + ".gguf", options);
      ADD_FAILURE() << "loaded on the Vulkan backend";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
    options.device = "auto";
    EXPECT_EQ(LocalRunner::open("../shared/" + model + ".gguf", options)->shard().device(), "cpu");
  }
}

TEST(VulkanBackend, ABadDeviceIsAClearError) {
  LocalOptions options;
  options.device = "cuda";
  try {
    LocalRunner::open("../shared/models/llama-q4_0.gguf", options);
    ADD_FAILURE() << "opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto, cpu, vulkan or vulkan:N"), std::string::npos);
  }
  options.device = "vulkan:99";
  EXPECT_THROW(LocalRunner::open("../shared/models/llama-q4_0.gguf", options), Error);
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.rfind('/') + 1);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(SharedModels, VulkanReferenceLogits,
                         ::testing::ValuesIn(models_where(true)), test_name);

}  // namespace
}  // namespace herd::engine
