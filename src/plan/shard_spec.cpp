#include "plan/shard_spec.h"

namespace herd {

engine::ShardSpec shard_spec(const Stage& stage, const Rank& rank, bool moe) {
  engine::ShardSpec spec;
  spec.layer_begin = stage.layer_begin;
  spec.layer_end = stage.layer_end;
  spec.embedding = stage.embedding;
  spec.output = stage.output;
  if (stage.ranks.size() < 2) return spec;  // the whole of every layer
  engine::TensorSlice& slice = spec.slice;
  slice.head_begin = rank.head_begin;
  slice.head_end = rank.head_end;
  slice.kv_head_begin = rank.kv_head_begin;
  slice.kv_head_end = rank.kv_head_end;
  slice.ff_begin = rank.ff_begin;
  slice.ff_end = rank.ff_end;
  if (moe) slice.experts = rank.experts;
  slice.vocab_begin = rank.vocab_begin;
  slice.vocab_end = rank.vocab_end;
  return spec;
}

}  // namespace herd
