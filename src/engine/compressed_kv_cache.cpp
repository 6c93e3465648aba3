#include "engine/compressed_kv_cache.h"

#include <algorithm>
#include <string>

#include "quant/float16.h"
#include "util/error.h"

namespace herd::engine {
namespace {

int64_t entries_for(int64_t n_ctx, int64_t ratio) {
  return (n_ctx + ratio - 1) / ratio;
}

size_t part_bytes(const CompressorShape& c, int64_t n_ctx, int64_t n_seq) {
  const auto ring = static_cast<size_t>(c.ring_rows() * c.width()) * 2 * sizeof(float);
  const auto entries = static_cast<size_t>(entries_for(n_ctx, c.ratio) * c.head_dim) * 2;
  return static_cast<size_t>(n_seq) * (ring + entries);
}

}  // namespace

CompressorShape attention_compressor(const CompressedCacheShape& s, const CompressedLayerSpec& l) {
  return {l.ratio, s.head_dim, l.indexed};
}

CompressorShape indexer_compressor(const CompressedCacheShape& s, const CompressedLayerSpec& l) {
  return {l.ratio, s.indexer_dim, true};
}

size_t CompressedKvCache::bytes_for(const CompressedCacheShape& s) {
  size_t total = 0;
  for (const CompressedLayerSpec& l : s.layers) {
    total += static_cast<size_t>(s.n_seq * s.window * s.head_dim) * 2;
    if (l.ratio == 0) continue;
    total += part_bytes(attention_compressor(s, l), s.n_ctx, s.n_seq);
    if (l.indexed) total += part_bytes(indexer_compressor(s, l), s.n_ctx, s.n_seq);
  }
  return total;
}

CompressedKvCache::CompressedKvCache(const CompressedCacheShape& shape) : shape_(shape) {
  if (shape.window <= 0 || shape.head_dim <= 0 || shape.n_seq <= 0 || shape.n_ctx <= 0) {
    throw Error("engine", "compressed KV cache: window " + std::to_string(shape.window) +
                              ", head size " + std::to_string(shape.head_dim) + ", " +
                              std::to_string(shape.n_seq) + " slots of " +
                              std::to_string(shape.n_ctx) + " positions");
  }
  lengths_.assign(static_cast<size_t>(shape.n_seq), 0);
  layers_.resize(shape.layers.size());
  for (size_t il = 0; il < shape.layers.size(); ++il) {
    const CompressedLayerSpec& l = shape.layers[il];
    LayerState& st = layers_[il];
    st.raw.assign(static_cast<size_t>(shape.n_seq * shape.window * shape.head_dim), 0);
    if (l.ratio == 0) continue;
    if (l.indexed && shape.indexer_dim <= 0) {
      throw Error("engine", "compressed KV cache: layer " + std::to_string(il) +
                                " is indexed but the indexer key size is 0");
    }
    auto add = [&](const CompressorShape& c) {
      Part p;
      p.shape = c;
      p.n_entries = entries_for(shape.n_ctx, c.ratio);
      const auto ring = static_cast<size_t>(shape.n_seq * c.ring_rows() * c.width());
      p.kv.assign(ring, 0.0f);
      p.score.assign(ring, 0.0f);
      p.entries.assign(static_cast<size_t>(shape.n_seq * p.n_entries * c.head_dim), 0);
      st.parts.push_back(std::move(p));
    };
    add(attention_compressor(shape, l));
    if (l.indexed) add(indexer_compressor(shape, l));
  }
}

size_t CompressedKvCache::bytes() const {
  size_t total = 0;
  for (const LayerState& st : layers_) {
    total += st.raw.size() * sizeof(uint16_t);
    for (const Part& p : st.parts) {
      total += (p.kv.size() + p.score.size()) * sizeof(float) + p.entries.size() * sizeof(uint16_t);
    }
  }
  return total;
}

CompressedKvCache::Part& CompressedKvCache::part(int64_t layer, int which) {
  LayerState& st = layers_[static_cast<size_t>(layer)];
  HERD_CHECK_MSG(which >= 0 && static_cast<size_t>(which) < st.parts.size(),
                 "layer " + std::to_string(layer) + " compressor " + std::to_string(which));
  return st.parts[static_cast<size_t>(which)];
}

int64_t CompressedKvCache::n_entries(int64_t layer) const {
  const LayerState& st = layers_[static_cast<size_t>(layer)];
  return st.parts.empty() ? 0 : st.parts[0].n_entries;
}

size_t CompressedKvCache::state_floats() const {
  size_t n = 0;
  for (const LayerState& st : layers_) {
    n += static_cast<size_t>(shape_.window * shape_.head_dim);
    for (const Part& p : st.parts)
      n += 2 * static_cast<size_t>(p.shape.ring_rows() * p.shape.width());
  }
  return n;
}

void CompressedKvCache::save_state(int64_t seq, float* out) const {
  const auto row = static_cast<size_t>(shape_.window * shape_.head_dim);
  for (const LayerState& st : layers_) {
    const uint16_t* raw = st.raw.data() + static_cast<size_t>(seq) * row;
    for (size_t i = 0; i < row; ++i) *out++ = fp16_to_fp32(raw[i]);  // exact
    for (const Part& p : st.parts) {
      const auto ring = static_cast<size_t>(p.shape.ring_rows() * p.shape.width());
      out = std::copy_n(p.kv.data() + static_cast<size_t>(seq) * ring, ring, out);
      out = std::copy_n(p.score.data() + static_cast<size_t>(seq) * ring, ring, out);
    }
  }
}

void CompressedKvCache::restore_state(int64_t seq, const float* in, int64_t length) {
  const auto row = static_cast<size_t>(shape_.window * shape_.head_dim);
  for (LayerState& st : layers_) {
    uint16_t* raw = st.raw.data() + static_cast<size_t>(seq) * row;
    for (size_t i = 0; i < row; ++i) raw[i] = fp32_to_fp16(*in++);
    for (Part& p : st.parts) {
      const auto ring = static_cast<size_t>(p.shape.ring_rows() * p.shape.width());
      std::copy_n(in, ring, p.kv.data() + static_cast<size_t>(seq) * ring);
      in += ring;
      std::copy_n(in, ring, p.score.data() + static_cast<size_t>(seq) * ring);
      in += ring;
    }
  }
  set_length(seq, length);
}

uint16_t* CompressedKvCache::raw(int64_t layer, int64_t seq, int64_t pos) {
  const int64_t w = shape_.window;
  return layers_[static_cast<size_t>(layer)].raw.data() + ((seq * w) + pos % w) * shape_.head_dim;
}

float* CompressedKvCache::ring_kv(int64_t layer, int64_t seq, int which) {
  Part& p = part(layer, which);
  return p.kv.data() + seq * p.shape.ring_rows() * p.shape.width();
}

float* CompressedKvCache::ring_score(int64_t layer, int64_t seq, int which) {
  Part& p = part(layer, which);
  return p.score.data() + seq * p.shape.ring_rows() * p.shape.width();
}

uint16_t* CompressedKvCache::entries(int64_t layer, int64_t seq, int which) {
  Part& p = part(layer, which);
  return p.entries.data() + seq * p.n_entries * p.shape.head_dim;
}

}  // namespace herd::engine
