// DeepSeek V4 through Shard: a pipeline of two shards in one process hands the
// hyper-connection streams (n_hc x n_embd per token) from one to the next and gives the
// whole model's logits exactly; a file with the reference's other tensor names
// (hc_head_*, attn_compress_*, indexer.compress_*) gives the same logits as herd's names.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/shard.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/arch.h"
#include "model/model_info.h"
#include "util/error.h"

namespace herd::engine {
namespace {

const char* kModel = "../shared/models/frontier2/deepseek4-q8_0.gguf";

// All logits of 40 tokens (positions 0 .. 39: a few CSA blocks) through shards [0, split)
// and [split, n_layer), or the whole model when split is 0.
std::vector<float> logits_of(const gguf::File& file, int64_t split) {
  const ModelInfo info = read_model_info(file);
  ShardOptions options;
  options.n_ctx = 64;
  options.n_threads = 2;
  options.isa = kernels::best_isa(kernels::detect_cpu());
  ThreadPool pool(2);
  Batch batch;
  for (int32_t i = 0; i < 40; ++i) batch.add((i * 37 + 11) % 384, 0, i, true);
  std::vector<float> hidden, logits;
  if (split == 0) {
    Shard whole = Shard::load(file, info, ShardSpec{}, options);
    whole.forward(batch, nullptr, logits, pool);
    return logits;
  }
  ShardSpec first, second;
  first.layer_end = split;
  first.output = false;
  second.layer_begin = split;
  second.embedding = false;
  Shard a = Shard::load(file, info, first, options);
  Shard b = Shard::load(file, info, second, options);
  a.forward(batch, nullptr, hidden, pool);
  EXPECT_EQ(hidden.size(), size_t{40} * static_cast<size_t>(info.hp.hidden_width()));
  b.forward(batch, hidden.data(), logits, pool);
  return logits;
}

TEST(ShardCompressed, PipelineStagesGiveTheWholeModelsLogits) {
  const gguf::File file = gguf::File::open(kModel);
  const std::vector<float> whole = logits_of(file, 0);
  ASSERT_EQ(whole.size(), size_t{40} * 384);
  for (int64_t split : {1, 2, 3}) {
    EXPECT_EQ(logits_of(file, split), whole) << "split at layer " << split;
  }
}

TEST(ShardCompressed, TheOtherTensorNamesLoadTheSame) {
  const gguf::File file = gguf::File::open(kModel);
  gguf::Writer w;
  for (const auto& [key, value] : file.metadata()) w.set_value(key, value);
  int renamed = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const std::string alias = tensor_alias(t.name);
    renamed += alias.empty() ? 0 : 1;
    w.add_tensor(alias.empty() ? std::string(t.name) : alias, t.type, t.shape);
  }
  EXPECT_EQ(renamed, 3 + 3 * 4 + 2 * 4);  // output_hc_*, 3 compressors of 4, 2 indexers of 4
  const std::string path = ::testing::TempDir() + "/deepseek4-other-names.gguf";
  w.write(path, [&](size_t index, std::span<uint8_t> out) {
    std::memcpy(out.data(), file.tensors()[index].data, out.size());
  });
  const gguf::File other = gguf::File::open(path);
  ASSERT_EQ(other.find_tensor("output_hc_fn.weight"), nullptr);
  ASSERT_NE(other.find_tensor("blk.1.indexer.compress_kv.weight"), nullptr);
  EXPECT_EQ(logits_of(other, 0), logits_of(file, 0));
  EXPECT_EQ(logits_of(other, 2), logits_of(file, 0));
}

// Tensor and expert parallelism do not cut compressed attention or its hyper-connections yet:
// a shard of some heads or experts is refused by name, not run wrong.
TEST(ShardCompressed, ASlicedShardIsRefused) {
  const gguf::File file = gguf::File::open(kModel);
  const ModelInfo info = read_model_info(file);
  ShardSpec spec;
  spec.slice.head_end = 2;
  spec.slice.kv_head_end = 1;
  try {
    Shard::load(file, info, spec, ShardOptions{});
    FAIL() << "a shard of two heads loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline stages only"), std::string::npos) << e.what();
  }
  ShardSpec experts;
  experts.slice.experts = std::vector<int64_t>{0, 1, 2, 3};
  EXPECT_THROW(Shard::load(file, info, experts, ShardOptions{}), Error);
}

// The window and compressor rings cannot be cut back: a batch continues a slot or starts it
// again at 0; a snapshot taken at a position continues from there as if never left.
TEST(ShardCompressed, SlotsContinueStartAgainOrRestoreASnapshot) {
  const gguf::File file = gguf::File::open(kModel);
  const ModelInfo info = read_model_info(file);
  ShardOptions options;
  options.n_ctx = 64;
  Shard shard = Shard::load(file, info, ShardSpec{}, options);
  ThreadPool pool(1);
  std::vector<float> logits;
  auto run = [&](int32_t from, int32_t to) {
    Batch b;
    for (int32_t i = from; i < to; ++i) b.add((i * 37 + 11) % 384, 0, i, i + 1 == to);
    shard.forward(b, nullptr, logits, pool);
    return logits;
  };
  ASSERT_TRUE(shard.has_recurrent_state());
  run(0, 21);
  const RecurrentSnapshot at21 = shard.snapshot_state(0);
  EXPECT_EQ(at21.pos, 21);
  const std::vector<float> straight = run(21, 30);
  Batch back;
  back.add(5, 0, 10, true);
  EXPECT_THROW(shard.forward(back, nullptr, logits, pool), Error);  // cut back to 10
  shard.restore_state(0, at21);
  EXPECT_EQ(run(21, 30), straight);
  run(0, 3);  // started again
  EXPECT_EQ(shard.snapshot_state(0).pos, 3);
}

}  // namespace
}  // namespace herd::engine
