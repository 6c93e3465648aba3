// The engine against the reference logits of ../shared/models, ../shared/models/frontier and
// ../shared/models/frontier2 (READMEs there): every model, every token file, held to the
// per-type tolerances the READMEs recommend and the top-1 rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/reference_check.h"
#include "engine/runner.h"
#include "engine/test_sequence.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace herd::engine {
namespace {

class ReferenceLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceLogits, WholeSequence) {
  check_model(GetParam(), {1, 256, kernels::best_isa(kernels::detect_cpu())});
}

TEST_P(ReferenceLogits, ScalarReference) {
  check_model(GetParam(), {1, 256, kernels::Isa::kScalar});
}

TEST_P(ReferenceLogits, ChunkedPrefillAndThreads) {
  const kernels::Isa best = kernels::best_isa(kernels::detect_cpu());
  check_model(GetParam(), {2, 8, best});
  check_model(GetParam(), {2, 1, best});  // token by token, as decoding does
}

// A model with recurrent state gives the same bits however a sequence is cut into batches
// (pipelines' micro-batches, replay after a lost node and prefix reuse rely on it): the
// recurrence sees tokens one by one whatever the batch.
TEST(ReferenceLogits, RecurrentModelsGiveTheSameBitsHoweverBatched) {
  for (const char* model : {"qwen35moe-q8_0", "qwen35-f32", "qwen3next-f32"}) {
    SCOPED_TRACE(model);
    LocalOptions options;
    options.threads = 2;
    options.n_ctx = 256;
    auto runner =
        LocalRunner::open(std::string("../shared/models/frontier2/") + model + ".gguf", options);
    const std::vector<int32_t> tokens =
        read_tokens(std::string("../shared/models/frontier2/") + model + ".1.tokens");
    const std::vector<float> whole = forward_sequence(*runner, tokens, 0, 256, true);
    EXPECT_EQ(forward_sequence(*runner, tokens, 0, 7, true), whole);
    EXPECT_EQ(forward_sequence(*runner, tokens, 0, 1, true), whole);
  }
}

// The models with multi-head latent attention.
std::vector<std::string> mla_model_names() {
  std::vector<std::string> names;
  for (const std::string& model : model_names()) {
    const gguf::File file = gguf::File::open("../shared/" + model + ".gguf");
    if (read_model_info(file).arch->attention == AttentionKind::kMla) names.push_back(model);
  }
  return names;
}

class DecompressedLatent : public ::testing::TestWithParam<std::string> {};

// Multi-head latent attention with the latent decompressed for every batch of two or more
// tokens (shard_mla_prefill.cpp): whole sequences, and chunks of 8 on the scalar kernels.
TEST_P(DecompressedLatent, MatchesTheReference) {
  const kernels::Isa best = kernels::best_isa(kernels::detect_cpu());
  check_model(GetParam(), {2, 256, best, 2});
  check_model(GetParam(), {1, 8, kernels::Isa::kScalar, 2});
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceLogits, ::testing::ValuesIn(model_names()),
                         model_test_name);
INSTANTIATE_TEST_SUITE_P(SharedModels, DecompressedLatent, ::testing::ValuesIn(mla_model_names()),
                         model_test_name);

}  // namespace
}  // namespace herd::engine
