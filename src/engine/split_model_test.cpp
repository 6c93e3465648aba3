// A model split in several files (gguf/split.h) runs exactly as the one file it was cut
// from: the same logits, bit for bit, for a dense and an MoE model, split in a few files
// and in as many as it has tensors, opened from its first file or another.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/shard.h"
#include "gguf/reader.h"
#include "gguf/split.h"
#include "model/model_info.h"
#include "model/synth_test_util.h"

namespace herd::engine {
namespace {

// All logits of 24 tokens of one sequence through the whole model.
std::vector<float> logits_of(const gguf::File& file) {
  const ModelInfo info = read_model_info(file);
  ShardOptions options;
  options.n_ctx = 64;
  options.n_threads = 2;
  options.isa = kernels::best_isa(kernels::detect_cpu());
  ThreadPool pool(2);
  Batch batch;
  for (int32_t i = 0; i < 24; ++i) {
    batch.add(static_cast<int32_t>((i * 37 + 11) % info.hp.n_vocab), 0, i, true);
  }
  std::vector<float> logits;
  Shard shard = Shard::load(file, info, ShardSpec{}, options);
  shard.forward(batch, nullptr, logits, pool);
  return logits;
}

void expect_split_runs_the_same(const std::string& arch, const std::string& type) {
  const SynthOptions o = synth_testing::small(arch, type, "split_model_" + arch + ".gguf");
  synthesize(o);
  const gguf::File whole = gguf::File::open(o.out_path);
  const std::vector<float> want = logits_of(whole);
  ASSERT_FALSE(want.empty());
  const std::string prefix = o.out_path.substr(0, o.out_path.size() - 5);
  for (int n_files : {3, static_cast<int>(whole.tensors().size())}) {
    const std::vector<std::string> paths = gguf::write_split(whole, prefix, n_files);
    for (const std::string& opened : {paths.front(), paths.back()}) {
      const gguf::File split = gguf::File::open(opened);
      ASSERT_EQ(split.n_files(), static_cast<size_t>(n_files));
      EXPECT_EQ(logits_of(split), want) << arch << " in " << n_files << " files, from " << opened;
    }
    for (const std::string& path : paths) std::filesystem::remove(path);
  }
  std::filesystem::remove(o.out_path);
}

TEST(SplitModel, DenseModelGivesTheSameLogits) {
  expect_split_runs_the_same("llama", "q8_0");
}

TEST(SplitModel, MoeModelGivesTheSameLogits) {
  expect_split_runs_the_same("qwen3moe", "q4_k_m");
}

}  // namespace
}  // namespace herd::engine
