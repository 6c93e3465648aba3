// Gemma 4's layers differ in shape: each layer caches its own KV heads and head size (none
// for a shared-KV layer), a shard never separates a shared-KV layer from the layer whose
// cache it reads, tensor slices are refused, and a two-stage split computes what one shard
// does, bit for bit, with the per-layer inputs of each stage's own layers.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "engine/shard.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace herd::engine {
namespace {

struct Model {
  gguf::File file;
  ModelInfo info;
  explicit Model(const std::string& name)
      : file(gguf::File::open("../shared/models/frontier2/" + name + ".gguf")),
        info(read_model_info(file)) {}
};

ShardOptions small_options() {
  ShardOptions o;
  o.n_ctx = 32;
  o.n_batch = 8;
  return o;
}

std::string load_error(const Model& m, const ShardSpec& spec) {
  try {
    Shard::load(m.file, m.info, spec, small_options());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LayerShapes, EachLayerCachesItsOwnWidths) {
  const Model g("gemma4-q8_0"), e("gemma4e-q8_0");
  // gemma4: 3 sliding layers of 2 KV heads x 32, a global one of 1 x 64; K and V in F16.
  const ShardSizes gs = Shard::sizes(g.info, ShardSpec{}, small_options());
  ASSERT_EQ(gs.cache.layers.size(), 4u);
  EXPECT_EQ(gs.cache.layers[0], (CacheLayer{.k_dim = 64, .v_dim = 64}));
  EXPECT_EQ(gs.cache.layers[3], (CacheLayer{.k_dim = 64, .v_dim = 64}));
  EXPECT_EQ(gs.kv_bytes, size_t{4} * 128 * 32 * 2);
  // gemma4e: 1 x 32 and 1 x 64, and nothing for the three shared-KV layers.
  const ShardSizes es = Shard::sizes(e.info, ShardSpec{}, small_options());
  ASSERT_EQ(es.cache.layers.size(), 6u);
  EXPECT_EQ(es.cache.layers[1], (CacheLayer{.k_dim = 32, .v_dim = 32}));
  EXPECT_EQ(es.cache.layers[2], (CacheLayer{.k_dim = 64, .v_dim = 64}));
  EXPECT_EQ(es.cache.layers[4], (CacheLayer{.kind = LayerCache::kKv, .k_dim = 0, .v_dim = 0}));
  EXPECT_EQ(es.kv_bytes, size_t{32 + 32 + 64} * 2 * 32 * 2);
  EXPECT_EQ(Shard::load(e.file, e.info, ShardSpec{}, small_options()).kv_cache_bytes(),
            es.kv_bytes);
}

TEST(LayerShapes, SharedKvAndTensorSlicesAreRefused) {
  const Model g("gemma4-q8_0"), e("gemma4e-q8_0");
  ShardSpec late;
  late.layer_begin = 2;
  late.embedding = false;
  EXPECT_NE(load_error(e, late).find("layer 3 reads the keys and values of layer 1"),
            std::string::npos)
      << load_error(e, late);
  ShardSpec heads;
  heads.slice.head_end = 2;
  heads.slice.kv_head_end = 1;
  EXPECT_NE(load_error(g, heads).find("tensor parallelism is not supported for gemma4"),
            std::string::npos)
      << load_error(g, heads);
}

// Stage 1 runs layers [0, cut) from the tokens, stage 2 [cut, n) from its activations and
// the same batch: the logits are the whole shard's, bit for bit.
void expect_split_matches(const Model& m, int64_t cut) {
  ThreadPool pool(2);
  Batch batch;
  const int32_t tokens[] = {1, 15, 27, 3, 99, 42, 7};
  for (int32_t p = 0; p < 7; ++p) batch.add(tokens[p], 0, p, true);
  Shard whole = Shard::load(m.file, m.info, ShardSpec{}, small_options());
  std::vector<float> want, hidden, got;
  whole.forward(batch, nullptr, want, pool);
  ShardSpec first, second;
  first.layer_end = cut;
  first.output = false;
  second.layer_begin = cut;
  second.embedding = false;
  Shard a = Shard::load(m.file, m.info, first, small_options());
  Shard b = Shard::load(m.file, m.info, second, small_options());
  a.forward(batch, nullptr, hidden, pool);
  b.forward(batch, hidden.data(), got, pool);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

TEST(LayerShapes, TwoStagesMatchOneShard) {
  expect_split_matches(Model("gemma4-q8_0"), 3);   // the global layer alone
  expect_split_matches(Model("gemma4e-q8_0"), 1);  // per-layer inputs in both stages
}

}  // namespace
}  // namespace herd::engine
