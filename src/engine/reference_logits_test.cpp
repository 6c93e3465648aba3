// The engine against the reference logits of ../shared/models (README there): every model,
// every token file, held to the per-type tolerances and the top-1 rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/generate.h"
#include "engine/runner.h"
#include "util/mapped_file.h"

namespace herd::engine {
namespace {

struct Tolerance {
  double max_err, mean_err;
};

Tolerance tolerance_for(const std::string& model) {
  const std::string type = model.substr(model.find('-') + 1);
  if (type == "f32" || type == "f16") return {1e-2, 3e-3};
  if (type == "bf16") return {3e-2, 1.5e-2};
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

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("../shared/models")) {
    if (entry.path().extension() == ".gguf") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Case {
  int threads;
  int64_t chunk;  // tokens per forward pass
  kernels::Isa isa;
};

// Runs every token file of `model` and checks the rows; returns a one-line summary.
void check_model(const std::string& model, const Case& c) {
  SCOPED_TRACE(model + " threads=" + std::to_string(c.threads) + " chunk=" +
               std::to_string(c.chunk) + " isa=" + std::string(kernels::isa_name(c.isa)));
  LocalOptions options;
  options.threads = c.threads;
  options.n_ctx = 256;
  options.isa_limit = c.isa;
  const Tolerance tol = tolerance_for(model);
  double max_err = 0, sum_err = 0;
  int rows = 0;
  for (int k = 0; k < 3; ++k) {
    const std::string base = "../shared/models/" + model + "." + std::to_string(k);
    std::vector<int32_t> tokens = read_tokens(base + ".tokens");
    std::vector<float> ref = read_logits(base + ".logits");
    // A fresh model per sequence: each reference run started with an empty cache.
    auto runner = LocalRunner::open("../shared/models/" + model + ".gguf", options);
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
  EXPECT_LE(max_err, tol.max_err);
  EXPECT_LE(sum_err / rows, tol.mean_err);
  std::printf("  %-14s isa=%-7s threads=%d chunk=%3lld  max err %.2e  mean err %.2e\n",
              model.c_str(), std::string(kernels::isa_name(c.isa)).c_str(), c.threads,
              static_cast<long long>(c.chunk), max_err, sum_err / rows);
}

TEST(ReferenceLogits, EveryModelWholeSequence) {
  const kernels::Isa best = kernels::best_isa(kernels::detect_cpu());
  for (const std::string& model : model_names()) check_model(model, {1, 256, best});
}

TEST(ReferenceLogits, EveryModelScalarReference) {
  for (const std::string& model : model_names())
    check_model(model, {1, 256, kernels::Isa::kScalar});
}

TEST(ReferenceLogits, ChunkedPrefillAndThreads) {
  const kernels::Isa best = kernels::best_isa(kernels::detect_cpu());
  for (const std::string& model : model_names()) {
    check_model(model, {2, 8, best});
    check_model(model, {2, 1, best});  // token by token, as decoding does
  }
}

}  // namespace
}  // namespace herd::engine
