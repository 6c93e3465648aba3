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

#include "engine/generate.h"
#include "engine/runner.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace herd::engine {
namespace {

struct Tolerance {
  double max_err, mean_err;
};

// model: a path without extension under ../shared ("models/llama-f16").
Tolerance tolerance_for(const std::string& model) {
  // frontier2's README: these two q8_0 files get the wider pair (the reference moves by up to
  // 0.05 with flash attention off, resp. is 6e-2 from exact arithmetic).
  if (model.ends_with("/deepseek4-q8_0") || model.ends_with("/gemma4e-q8_0")) return {0.2, 0.1};
  const std::string type = model.substr(model.rfind('-') + 1);
  if (type == "f32" || type == "f16") return {1e-2, 3e-3};
  if (type == "bf16") return {3e-2, 1.5e-2};
  // 2-3 bit and IQ4_XS weights: the reference itself is 5-6.5e-2 from exact arithmetic.
  if (type == "iq4_xs" || type == "q2_k" || type == "iq3_s") return {0.2, 0.1};
  return {0.1, 0.05};
}

std::vector<int32_t> read_tokens(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<int32_t> ids;
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::vector<float> read_logits(const std::string& path) {
  std::string bytes = read_file(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// Architectures of ../shared/models/frontier2 that herd does not run yet (issue 29 adds them
// one by one). NotYetRun below fails once one of them loads, so that the list cannot hide a
// model that works; every other model of the folders is checked.
const std::vector<std::string> kNotYetRun = {"gemma4", "gemma4e"};

bool not_yet_run(const std::string& model) {
  const std::string stem = model.substr(model.rfind('/') + 1);
  const std::string family = stem.substr(0, stem.rfind('-'));
  return std::find(kNotYetRun.begin(), kNotYetRun.end(), family) != kNotYetRun.end();
}

// "models/llama-f16", "models/frontier/gemma3-f32", ...: every .gguf of the folders.
std::vector<std::string> model_names(bool runnable = true) {
  std::vector<std::string> names;
  for (const char* dir : {"models", "models/frontier", "models/frontier2"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::string("../shared/") + dir)) {
      const std::string name = std::string(dir) + "/" + entry.path().stem().string();
      if (entry.path().extension() == ".gguf" && not_yet_run(name) != runnable)
        names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Case {
  int threads;
  int64_t chunk;  // tokens per forward pass
  kernels::Isa isa;
  int64_t mla_decompress_min_tokens = -1;  // LocalOptions'
};

// Runs every token file of `model` and checks the rows; returns a one-line summary.
void check_model(const std::string& model, const Case& c) {
  SCOPED_TRACE(model + " threads=" + std::to_string(c.threads) + " chunk=" +
               std::to_string(c.chunk) + " isa=" + std::string(kernels::isa_name(c.isa)));
  LocalOptions options;
  options.threads = c.threads;
  options.n_ctx = 256;
  options.isa_limit = c.isa;
  options.mla_decompress_min_tokens = c.mla_decompress_min_tokens;
  const Tolerance tol = tolerance_for(model);
  double max_err = 0, sum_err = 0;
  int rows = 0;
  // Three token files, four for deepseek4 (whose fourth reaches a layer that compresses
  // blocks of 128 tokens).
  for (int k = 0;
       std::filesystem::exists("../shared/" + model + "." + std::to_string(k) + ".tokens"); ++k) {
    const std::string base = "../shared/" + model + "." + std::to_string(k);
    std::vector<int32_t> tokens = read_tokens(base + ".tokens");
    std::vector<float> ref = read_logits(base + ".logits");
    // A fresh model per sequence: each reference run started with an empty cache.
    auto runner = LocalRunner::open("../shared/" + model + ".gguf", options);
    const int64_t n_vocab = runner->hparams().n_vocab;
    ASSERT_EQ(ref.size(), tokens.size() * static_cast<size_t>(n_vocab));
    const std::vector<float> all = forward_sequence(*runner, tokens, 0, c.chunk, true);
    ASSERT_EQ(all.size(), ref.size());
    for (size_t p = 0; p < tokens.size(); ++p) {
      const float* x = all.data() + p * n_vocab;
      const float* r = ref.data() + p * n_vocab;
      double ref_max = 0, diff = 0;
      for (int64_t j = 0; j < n_vocab; ++j) {
        ref_max = std::max(ref_max, std::fabs(static_cast<double>(r[j])));
        diff = std::max(diff, std::fabs(static_cast<double>(x[j]) - r[j]));
      }
      const double scale = std::max(1.0, ref_max);
      const double err = diff / scale;
      max_err = std::max(max_err, err);
      sum_err += err;
      ++rows;
      // Top-1 rule: our argmax must be (near) the reference's best.
      const int64_t ours = std::max_element(x, x + n_vocab) - x;
      const float best = *std::max_element(r, r + n_vocab);
      EXPECT_GE(r[ours], best - 2 * tol.max_err * scale) << "sequence " << k << " row " << p;
    }
  }
  EXPECT_GE(rows, 3 * 9);  // every model has at least three sequences, the shortest of 9
  EXPECT_LE(max_err, tol.max_err);
  EXPECT_LE(sum_err / rows, tol.mean_err);
  std::printf("  %-30s isa=%-7s threads=%d chunk=%3lld  max err %.2e  mean err %.2e\n",
              model.c_str(), std::string(kernels::isa_name(c.isa)).c_str(), c.threads,
              static_cast<long long>(c.chunk), max_err, sum_err / rows);
}

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

TEST(ReferenceLogitsList, NotYetRunModelsDoNotLoad) {
  const std::vector<std::string> pending = model_names(false);
  for (const std::string& model : pending) {
    EXPECT_THROW(LocalRunner::open("../shared/" + model + ".gguf", LocalOptions{}), Error)
        << model << " loads now: take its family off kNotYetRun, so that its logits are checked";
  }
  std::printf("  frontier2 models not run yet: %zu\n", pending.size());
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.rfind('/') + 1);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(SharedModels, ReferenceLogits, ::testing::ValuesIn(model_names()),
                         test_name);
INSTANTIATE_TEST_SUITE_P(SharedModels, DecompressedLatent, ::testing::ValuesIn(mla_model_names()),
                         test_name);

}  // namespace
}  // namespace herd::engine
