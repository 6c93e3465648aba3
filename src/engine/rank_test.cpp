// A Rank placed over a GPU and the CPU as a later pipeline stage (a pod node's part): it reads
// the previous stage's activations on both of its halves, the first layers on the device and
// the rest on the CPU, or the routed experts on the CPU beside the device; against the
// reference logits. And the placements a Rank refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/rank.h"
#include "engine/reference_check.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/error.h"
#include "vulkan/test_device.h"

namespace herd::engine {
namespace {

constexpr int64_t kCtx = 64;

ShardOptions options_on(const std::string& device) {
  ShardOptions o;
  o.n_ctx = kCtx;
  o.isa = kernels::best_isa(kernels::detect_cpu());
  o.n_threads = 2;
  o.device = choose_device(device, *find_arch("llama"), HParams{}, nullptr);
  return o;
}

// Stage 0 ([0, split) on the CPU, a whole Rank) feeds stage 1 ([split, n) placed as `placement`
// on the test device); every token's logits against the reference's.
void check_two_stages(const std::string& model, int64_t split, DevicePlacement placement) {
  SCOPED_TRACE(model);
  const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
  const ModelInfo info = read_model_info(file);
  ShardSpec first, second;
  first.layer_end = split;
  first.output = false;
  second.layer_begin = split;
  second.embedding = false;
  auto stage0 = Rank::open(file, info, first, options_on("cpu"), DevicePlacement{});
  const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
  auto stage1 =
      Rank::open(file, info, second,
                 options_on(std::string("vulkan:") + (index != nullptr ? index : "0")), placement);
  ASSERT_EQ(stage1->placement(), placement.kind);
  EXPECT_NE(stage1->describe(kernels::Isa::kScalar).find("CPU"), std::string::npos);

  const std::vector<int32_t> tokens = read_tokens("../shared/" + model + ".0.tokens");
  const std::vector<float> ref = read_logits("../shared/" + model + ".0.logits");
  const int64_t n_vocab = info.hp.n_vocab;
  const auto n = static_cast<int64_t>(std::min<size_t>(tokens.size(), kCtx));
  ASSERT_GE(ref.size(), static_cast<size_t>(n * n_vocab));
  Batch batch;
  for (int64_t p = 0; p < n; ++p) batch.add(tokens[size_t(p)], 0, static_cast<int32_t>(p), true);
  std::vector<float> hidden, logits;
  stage0->forward(batch, nullptr, hidden);
  stage1->forward(batch, hidden.data(), logits);
  ASSERT_EQ(logits.size(), static_cast<size_t>(n * n_vocab));
  const Tolerance tol = tolerance_for(model);
  double max_err = 0;
  for (int64_t p = 0; p < n; ++p) {
    const float* x = logits.data() + p * n_vocab;
    const float* r = ref.data() + p * n_vocab;
    double ref_max = 0, diff = 0;
    for (int64_t j = 0; j < n_vocab; ++j) {
      ref_max = std::max(ref_max, std::fabs(static_cast<double>(r[j])));
      diff = std::max(diff, std::fabs(static_cast<double>(x[j]) - r[j]));
    }
    max_err = std::max(max_err, diff / std::max(1.0, ref_max));
  }
  EXPECT_LE(max_err, tol.max_err);
}

TEST(Rank, ALaterStageOverTheDeviceAndTheCpuReadsItsInput) {
  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  DevicePlacement first_layers;
  first_layers.kind = DevicePlacement::kFirstLayers;
  first_layers.device_layers = 2;
  check_two_stages("models/frontier/gemma3-f32", 2, first_layers);  // 6 layers: 2 | 2 + 2
  DevicePlacement experts;
  experts.kind = DevicePlacement::kExpertsOnCpu;
  check_two_stages("models/qwen3moe-f16", 1, experts);
  check_two_stages("models/frontier2/glm4moe-q8_0", 2, experts);
}

TEST(Rank, RefusesASplitItCannotRun) {
  const gguf::File file = gguf::File::open("../shared/models/llama-q8_0.gguf");
  const ModelInfo info = read_model_info(file);
  DevicePlacement split;
  split.kind = DevicePlacement::kExpertsOnCpu;
  // On the CPU there is no device to split over.
  EXPECT_THROW(Rank::open(file, info, ShardSpec{}, options_on("cpu"), split), Error);
  auto whole = Rank::open(file, info, ShardSpec{}, options_on("cpu"), DevicePlacement{});
  EXPECT_EQ(whole->placement(), DevicePlacement::kDevice);
  EXPECT_EQ(whole->cpu_experts(), nullptr);
  EXPECT_EQ(whole->cpu_stage(), nullptr);

  HERD_TEST_VULKAN_CONTEXT(context);
  static_cast<void>(context);
  const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
  const ShardOptions device = options_on(std::string("vulkan:") + (index != nullptr ? index : "0"));
  // A tensor-parallel rank's slice runs on one device.
  ShardSpec sliced;
  sliced.slice.head_end = 2;
  EXPECT_THROW(Rank::open(file, info, sliced, device, split), Error);
  // The first layers: at least one, and at least one left for the CPU (2 layers here).
  DevicePlacement layers;
  layers.kind = DevicePlacement::kFirstLayers;
  for (int64_t k : {0, 2, 5}) {
    layers.device_layers = k;
    EXPECT_THROW(Rank::open(file, info, ShardSpec{}, device, layers), Error) << k;
  }
  layers.device_layers = 1;
  auto rank = Rank::open(file, info, ShardSpec{}, device, layers);
  ASSERT_NE(rank->cpu_stage(), nullptr);
  // A part over a GPU and the CPU takes no tensor-parallel all-reduce.
  struct Sum : AllReduce {
    void sum(float*, size_t) override {}
  } sum;
  Batch batch;
  batch.add(1, 0, 0, true);
  std::vector<float> out;
  EXPECT_THROW(rank->forward(batch, nullptr, out, &sum), Error);
  rank->forward(batch, nullptr, out);
  EXPECT_EQ(out.size(), static_cast<size_t>(info.hp.n_vocab));
}

}  // namespace
}  // namespace herd::engine
