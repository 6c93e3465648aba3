// Checks an engine's logits against the reference logits of ../shared/models,
// ../shared/models/frontier and ../shared/models/frontier2 (READMEs there): every token file
// of a model, held to the per-type tolerances the READMEs recommend and the top-1 rule.
// Shared by the CPU's tests (reference_logits_test.cpp) and the Vulkan backend's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "engine/test_sequence.h"
#include "util/mapped_file.h"

namespace herd::engine {

struct Tolerance {
  double max_err, mean_err;
};

// model: a path without extension under ../shared ("models/llama-f16").
inline Tolerance tolerance_for(const std::string& model) {
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

inline std::vector<int32_t> read_tokens(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<int32_t> ids;
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

inline std::vector<float> read_logits(const std::string& path) {
  std::string bytes = read_file(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// "models/llama-f16", "models/frontier/gemma3-f32", ...: every .gguf of the folders.
// The logits of `tokens` run one per forward as positions 0.. of slot `seq`: [n][n_vocab].
inline std::vector<float> token_by_token(ModelRunner& runner, const std::vector<int32_t>& tokens,
                                         int32_t seq) {
  std::vector<float> all, logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Batch batch;
    batch.add(tokens[i], seq, static_cast<int32_t>(i), true);
    runner.forward(batch, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

// A test's name for a model path ("frontier2/glm4moe-q8_0" -> "glm4moe_q8_0"): parameterized
// tests over the shared models name their cases with it.
inline std::string model_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(info.param.rfind('/') + 1);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

inline std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const char* dir : {"models", "models/frontier", "models/frontier2"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::string("../shared/") + dir)) {
      const std::string name = std::string(dir) + "/" + entry.path().stem().string();
      if (entry.path().extension() == ".gguf") names.push_back(name);
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
  std::string device = "cpu";              // LocalOptions'
  std::string experts = "auto";            // LocalOptions'
  int64_t device_layers = -1;              // LocalOptions'
};

// Runs every token file of `model` and checks the rows; returns a one-line summary.
inline void check_model(const std::string& model, const Case& c) {
  SCOPED_TRACE(model + " threads=" + std::to_string(c.threads) +
               " chunk=" + std::to_string(c.chunk) +
               " isa=" + std::string(kernels::isa_name(c.isa)) + " device=" + c.device);
  LocalOptions options;
  options.threads = c.threads;
  options.n_ctx = 256;
  options.isa_limit = c.isa;
  options.mla_decompress_min_tokens = c.mla_decompress_min_tokens;
  options.device = c.device;
  options.experts = c.experts;
  options.device_layers = c.device_layers;
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
  std::printf("  %-30s %s isa=%-7s threads=%d chunk=%3lld  max err %.2e  mean err %.2e\n",
              model.c_str(), c.device.c_str(), std::string(kernels::isa_name(c.isa)).c_str(),
              c.threads, static_cast<long long>(c.chunk), max_err, sum_err / rows);
}

}  // namespace herd::engine
