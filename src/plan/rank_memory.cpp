#include "plan/rank_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>

#include "engine/shard.h"
#include "util/error.h"

namespace herd {
namespace {

// Threads whose attention scores Shard::forward keeps; a bound on the cores of the machines
// herd meets, so that the estimate need not know them.
constexpr int kScoreThreads = 64;

// Shard::forward's buffers for n_batch tokens, as the shard reports them (engine/shard.h),
// computed with every FFN row of the model even for a tensor slice: an upper bound that
// does not depend on which rows, and the slices' buffers are not smaller by much.
uint64_t scratch_bytes(const PlanModel& m, const PlanOptions& o, const RankLoad& load) {
  HERD_CHECK(m.arch_row != nullptr);
  ModelInfo info;
  info.arch = m.arch_row;
  info.hp = m.hp;
  engine::ShardSpec spec;
  spec.layer_begin = 0;
  spec.layer_end = std::min<int64_t>(1, m.hp.n_layer);
  spec.embedding = load.embedding;
  spec.output = load.output;
  spec.slice.head_end = std::min(load.heads, m.hp.n_head);
  spec.slice.kv_head_end = std::max<int64_t>(std::min(load.kv_heads, m.hp.n_head_kv),
                                             spec.slice.head_end > 0 ? m.hp.n_head_kv : 0);
  engine::ShardOptions so;
  so.n_ctx = o.n_ctx;
  so.n_seq = 1;
  so.n_batch = o.n_batch;
  so.n_threads = kScoreThreads;
  uint64_t bytes = engine::Shard::sizes(info, spec, so).scratch_bytes;
  if (load.output) bytes += 4 * static_cast<uint64_t>(o.n_batch) * static_cast<uint64_t>(m.n_vocab);
  return bytes;
}

// The product, or kMaxBytes when it is larger: absurd contexts stay comparable without
// overflowing (sums of a few such values still fit in 64 bits).
constexpr uint64_t kMaxBytes = uint64_t{1} << 60;
uint64_t capped_product(std::initializer_list<uint64_t> factors) {
  uint64_t product = 1;
  for (uint64_t f : factors) {
    if (f != 0 && product > kMaxBytes / f) return kMaxBytes;
    product *= f;
  }
  return product;
}

}  // namespace

uint64_t slice_bytes(uint64_t total, int64_t part, int64_t whole) {
  HERD_CHECK(whole > 0 && part >= 0 && part <= whole);
  const uint64_t p = static_cast<uint64_t>(part), w = static_cast<uint64_t>(whole);
  // total = q * w + r: total * p / w = q * p + r * p / w, and r * p < w * w <= 2^62.
  const uint64_t q = total / w, r = total % w;
  return q * p + (r * p + w - 1) / w;
}

namespace {

// Compressed attention keeps a window of rows, compressor states and one entry per `ratio`
// positions per layer, which differ by layer: the shard's own count of the stage's layers.
uint64_t compressed_cache_bytes(const PlanModel& m, const PlanOptions& o, const RankLoad& load) {
  if (load.n_layers == 0 || load.kv_heads == 0) return 0;
  ModelInfo info;
  info.arch = m.arch_row;
  info.hp = m.hp;
  engine::ShardSpec spec;
  spec.layer_begin = load.layer_begin;
  spec.layer_end = load.layer_begin + load.n_layers;
  engine::ShardOptions so;
  so.n_ctx = o.n_ctx;
  so.n_seq = std::max<int64_t>(1, o.n_seq);
  so.n_batch = 1;
  return engine::Shard::sizes(info, spec, so).kv_bytes;
}

}  // namespace

MemoryEstimate estimate_memory(const PlanModel& m, const PlanOptions& o, const RankLoad& load) {
  MemoryEstimate e;
  const int64_t cells = m.n_ff * std::max<int64_t>(1, m.n_expert);
  e.weights = load.layers.replicated_bytes + m.global_bytes +
              slice_bytes(load.layers.attn_q_bytes, load.heads, m.n_head) +
              slice_bytes(load.layers.attn_kv_bytes, load.kv_heads, m.n_head_kv) +
              slice_bytes(load.layers.ffn_bytes, load.ffn_cells, cells);
  if (load.embedding) e.weights += m.embedding_bytes;
  if (load.output) {
    e.weights += m.output_norm_bytes;
    // A tied head is token_embd itself: a rank that embeds already holds all of it.
    if (!(m.tied_output && load.embedding)) {
      e.weights += slice_bytes(m.output_bytes, load.vocab_rows, m.n_vocab);
    }
  }
  if (m.arch_row != nullptr && m.arch_row->attention == AttentionKind::kCompressed) {
    e.kv_cache = compressed_cache_bytes(m, o, load);
  } else {
    // Attention layers cache their KV heads' rows of every position; recurrent layers one
    // state per sequence (engine/kv_cache.h), counted whole on every rank: a rank holds its
    // V heads' share of it.
    e.kv_cache =
        capped_product({static_cast<uint64_t>(load.n_layers - load.n_recurrent),
                        static_cast<uint64_t>(load.kv_heads), m.kv_bytes_per_head_per_token(),
                        static_cast<uint64_t>(o.n_ctx), static_cast<uint64_t>(o.n_seq)}) +
        capped_product({static_cast<uint64_t>(load.n_recurrent), m.recurrent_state_bytes,
                        static_cast<uint64_t>(o.n_seq)});
  }
  e.scratch = scratch_bytes(m, o, load);
  return e;
}

RankLoad rank_load(const PlanModel& m, const Stage& stage, const Rank& rank) {
  HERD_CHECK(stage.layer_begin >= 0 && stage.layer_begin <= stage.layer_end &&
             stage.layer_end <= static_cast<int64_t>(m.layers.size()));
  RankLoad load;
  load.layer_begin = stage.layer_begin;
  load.n_layers = stage.layer_end - stage.layer_begin;
  load.n_recurrent = m.recurrent_layers(stage.layer_begin, stage.layer_end);
  for (int64_t il = stage.layer_begin; il < stage.layer_end; ++il) {
    const PlanLayer& l = m.layers[static_cast<size_t>(il)];
    load.layers.replicated_bytes += l.replicated_bytes;
    load.layers.attn_q_bytes += l.attn_q_bytes;
    load.layers.attn_kv_bytes += l.attn_kv_bytes;
    load.layers.ffn_bytes += l.ffn_bytes;
  }
  load.heads = rank.head_end - rank.head_begin;
  load.kv_heads = rank.kv_head_end - rank.kv_head_begin;
  const int64_t rows = rank.ff_end - rank.ff_begin;
  load.ffn_cells = m.moe() ? rows * static_cast<int64_t>(rank.experts.size()) : rows;
  load.vocab_rows = stage.output ? rank.vocab_end - rank.vocab_begin : 0;
  load.embedding = rank.embedding;
  load.output = stage.output;
  return load;
}

uint64_t unified_model_limit(uint64_t total_bytes) {
  const uint64_t system_share = std::max(uint64_t{4} << 30, total_bytes / 4);
  return total_bytes > system_share ? total_bytes - system_share : 0;
}

uint64_t usable_memory(const NodeProfile& node, const PlanOptions& options) {
  const double usable = std::floor(static_cast<double>(node.free_memory_bytes) *
                                   std::clamp(options.memory_headroom, 0.0, 1.0));
  const uint64_t bytes =
      usable >= 18446744073709549568.0 ? UINT64_MAX : static_cast<uint64_t>(usable);
  if (node.unified_memory && node.total_memory_bytes > 0)
    return std::min(bytes, unified_model_limit(node.total_memory_bytes));
  return bytes;
}

std::string memory_text(uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", b / (uint64_t{1} << 30));
  } else {
    std::snprintf(text, sizeof text, "%.1f MiB", b / (1 << 20));
  }
  return text;
}

}  // namespace herd
