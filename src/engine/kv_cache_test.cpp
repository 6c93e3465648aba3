#include "engine/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "util/error.h"

namespace herd::engine {
namespace {

// A hybrid shard: attention, two linear-attention layers, attention; 3 slots.
CacheLayout hybrid_layout() {
  CacheLayout layout;
  const CacheLayer kv{.kind = LayerCache::kKv, .k_dim = 4, .v_dim = 2};
  const CacheLayer recurrent{.kind = LayerCache::kRecurrent};
  layout.layers = {kv, recurrent, recurrent, kv};
  layout.n_seq = 3;
  layout.n_ctx = 8;
  layout.recurrent = {3, 10, 2, 4, 5};  // conv 3 x 10, delta 2 x 4 x 5
  return layout;
}

Batch batch_of(std::initializer_list<std::pair<int32_t, int32_t>> seq_pos) {
  Batch b;
  for (auto [seq, pos] : seq_pos) b.add(1, seq, pos, false);
  return b;
}

void fill_states(KvCache& cache, float value) {
  for (int64_t il : {1, 2}) {
    for (int64_t s = 0; s < cache.n_seq(); ++s) {
      std::fill_n(cache.conv_state(il, s), cache.recurrent_shape().floats(), value);
    }
  }
}

TEST(KvCache, HoldsKvRowsOnlyForAttentionLayersAndStatesForLinearOnes) {
  const CacheLayout layout = hybrid_layout();
  KvCache cache(layout);
  EXPECT_EQ(cache.kind(1), LayerCache::kRecurrent);
  EXPECT_EQ(layout.recurrent.floats(), 3 * 10 + 2 * 4 * 5);
  // Two KV layers of 3 x 8 cells of 4 + 2 halves, two recurrent layers of 3 rows of 70 floats.
  EXPECT_EQ(KvCache::bytes_for(layout), size_t{2 * 3 * 8 * 6 * 2 + 2 * 3 * 70 * 4});
  EXPECT_EQ(cache.bytes(), KvCache::bytes_for(layout));
  // Every (layer, slot) state row is its own; the delta state follows the conv inputs.
  std::set<float*> rows;
  for (int64_t il : {1, 2}) {
    for (int64_t s = 0; s < 3; ++s) {
      EXPECT_EQ(cache.delta_state(il, s), cache.conv_state(il, s) + 30);
      rows.insert(cache.conv_state(il, s));
    }
  }
  EXPECT_EQ(rows.size(), 6u);
  EXPECT_EQ(cache.k(3, 0, 0), cache.k(0, 0, 0) + 3 * 8 * 4);  // layer 3 is the second KV layer
  // The old constructor: every layer attention.
  KvCache plain(2, 1, 4, 8, 8);
  EXPECT_FALSE(plain.has_recurrent());
  EXPECT_EQ(plain.bytes(), KvCache::bytes_for(2, 1, 4, 8, 8));
}

// Gemma 4's shape beside recurrent layers: every KV layer has its own widths (a global
// layer's one wide head, a sliding layer's two narrow ones, MLA's key row without values),
// and a layer that reads another's cache has none.
TEST(KvCache, EachLayerHasItsOwnRowWidths) {
  CacheLayout layout;
  layout.layers = {{.k_dim = 8, .v_dim = 8},
                   {.kind = LayerCache::kRecurrent},
                   {.k_dim = 16, .v_dim = 16},
                   {.k_dim = 6, .v_dim = 0},
                   {}};  // reads layer 0's or 2's
  layout.n_seq = 2;
  layout.n_ctx = 5;
  layout.recurrent = {1, 2, 1, 2, 2};  // 2 + 4 floats
  KvCache cache(layout);
  EXPECT_EQ(cache.k_dim(0), 8);
  EXPECT_EQ(cache.v_dim(2), 16);
  EXPECT_EQ(cache.v_dim(3), 0);
  EXPECT_EQ(cache.k_dim(4), 0);
  EXPECT_EQ(cache.kind(4), LayerCache::kKv);
  // (8 + 8 + 16 + 16 + 6) halves per position of 2 x 5 cells; one state of 6 floats per slot.
  EXPECT_EQ(KvCache::bytes_for(layout), size_t{54 * 2 * 5 * 2 + 2 * 6 * 4});
  EXPECT_EQ(cache.bytes(), KvCache::bytes_for(layout));
  // Rows follow each other within a layer by its own widths, and layers do not overlap.
  EXPECT_EQ(cache.k(0, 1, 2), cache.k(0, 0, 0) + (5 + 2) * 8);
  EXPECT_EQ(cache.k(2, 0, 0), cache.k(0, 0, 0) + 2 * 5 * 8);
  EXPECT_EQ(cache.k(2, 1, 4), cache.k(2, 0, 0) + (5 + 4) * 16);
  EXPECT_EQ(cache.k(3, 0, 0), cache.k(2, 0, 0) + 2 * 5 * 16);
  EXPECT_EQ(cache.v(3, 0, 0), cache.v(3, 1, 4));  // no values: every row is empty
  EXPECT_EQ(cache.v(2, 0, 0), cache.v(0, 0, 0) + 2 * 5 * 8);
  // Every key row of every KV layer, written with its own value, reads back.
  for (int64_t il : {0, 2, 3}) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t p = 0; p < 5; ++p) {
        std::fill_n(cache.k(il, s, p), cache.k_dim(il),
                    static_cast<uint16_t>(il * 100 + s * 10 + p));
      }
    }
  }
  for (int64_t il : {0, 2, 3}) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t p = 0; p < 5; ++p) {
        const uint16_t* row = cache.k(il, s, p);
        for (int64_t i = 0; i < cache.k_dim(il); ++i) {
          ASSERT_EQ(row[i], il * 100 + s * 10 + p) << il << " " << s << " " << p;
        }
      }
    }
  }
  EXPECT_TRUE(cache.has_recurrent());
  EXPECT_EQ(cache.delta_state(1, 1), cache.conv_state(1, 1) + 2);
}

TEST(KvCache, PositionZeroStartsASequenceAfreshAndOthersMustContinueIt) {
  KvCache cache(hybrid_layout());
  fill_states(cache, 1.0f);
  // Slot 1 starts at 0 (zeroed); slot 2, fresh, may start at 0 too.
  const Batch first = batch_of({{1, 0}, {2, 0}, {1, 1}, {1, 2}, {2, 1}});
  cache.begin_recurrent(first);
  EXPECT_EQ(cache.conv_state(1, 1)[0], 0.0f);
  EXPECT_EQ(cache.delta_state(2, 2)[39], 0.0f);
  EXPECT_EQ(cache.conv_state(1, 0)[0], 1.0f);  // slot 0 untouched
  EXPECT_EQ(cache.recurrent_pos(1), -1);       // mid-pass
  cache.end_recurrent(first);
  EXPECT_EQ(cache.recurrent_pos(1), 3);
  EXPECT_EQ(cache.recurrent_pos(2), 2);

  cache.delta_state(1, 1)[0] = 5.0f;
  // Going back (a prefix cut) or skipping ahead is refused, and changes nothing.
  for (const Batch& bad : {batch_of({{1, 2}}), batch_of({{1, 4}}), batch_of({{1, 3}, {1, 5}}),
                           batch_of({{2, 2}, {1, 2}})}) {
    EXPECT_THROW(cache.begin_recurrent(bad), Error);
    EXPECT_EQ(cache.recurrent_pos(1), 3);
    EXPECT_EQ(cache.recurrent_pos(2), 2);
    EXPECT_EQ(cache.delta_state(1, 1)[0], 5.0f);
  }
  const Batch next = batch_of({{1, 3}, {2, 2}, {1, 4}});
  cache.begin_recurrent(next);
  EXPECT_EQ(cache.delta_state(1, 1)[0], 5.0f);  // continued, not zeroed
  cache.end_recurrent(next);
  EXPECT_EQ(cache.recurrent_pos(1), 5);

  // A pass that never ended leaves the slot unusable until it starts again at 0.
  cache.begin_recurrent(batch_of({{1, 5}}));
  EXPECT_THROW(cache.begin_recurrent(batch_of({{1, 6}})), Error);
  EXPECT_NO_THROW(cache.begin_recurrent(batch_of({{1, 0}})));
}

TEST(KvCache, SnapshotsRestoreAStateAndItsPosition) {
  KvCache cache(hybrid_layout());
  const Batch prompt = batch_of({{0, 0}, {0, 1}});
  cache.begin_recurrent(prompt);
  for (int64_t il : {1, 2}) {
    for (int64_t i = 0; i < 70; ++i) cache.conv_state(il, 0)[i] = float(il * 100 + i);
  }
  cache.end_recurrent(prompt);
  const RecurrentSnapshot at2 = cache.snapshot(0);
  EXPECT_EQ(at2.pos, 2);
  EXPECT_EQ(at2.rows.size(), 140u);

  // Slot 0 moves on; the snapshot goes back into slot 0 and into slot 2.
  const Batch more = batch_of({{0, 2}});
  cache.begin_recurrent(more);
  cache.delta_state(2, 0)[3] = -1.0f;
  cache.end_recurrent(more);
  cache.restore(0, at2);
  cache.restore(2, at2);
  for (int64_t s : {0, 2}) {
    EXPECT_EQ(cache.recurrent_pos(s), 2);
    for (int64_t il : {1, 2}) {
      for (int64_t i = 0; i < 70; ++i) ASSERT_EQ(cache.conv_state(il, s)[i], float(il * 100 + i));
    }
  }
  EXPECT_NO_THROW(cache.begin_recurrent(batch_of({{2, 2}})));

  // snapshot_into reuses the buffer; a snapshot of another layout is refused.
  RecurrentSnapshot reused;
  cache.snapshot_into(1, reused);
  EXPECT_EQ(reused.rows.size(), 140u);
  CacheLayout other = hybrid_layout();
  other.recurrent.conv_dim = 12;
  KvCache wider(other);
  EXPECT_THROW(wider.restore(0, at2), Error);
}

}  // namespace
}  // namespace herd::engine
