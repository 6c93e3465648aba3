#include "engine/kv_cache.h"

#include <utility>

namespace herd::engine {

KvCache::KvCache(std::vector<KvLayerDims> layers, int64_t n_seq, int64_t n_ctx)
    : layers_(std::move(layers)), n_seq_(n_seq), n_ctx_(n_ctx) {
  const auto cells = static_cast<size_t>(n_seq * n_ctx);
  size_t k = 0, v = 0;
  for (const KvLayerDims& d : layers_) {
    k_begin_.push_back(k);
    v_begin_.push_back(v);
    k += cells * static_cast<size_t>(d.k_dim);
    v += cells * static_cast<size_t>(d.v_dim);
  }
  k_.resize(k);
  v_.resize(v);
}

size_t KvCache::bytes_for(const std::vector<KvLayerDims>& layers, int64_t n_seq, int64_t n_ctx) {
  size_t values = 0;
  for (const KvLayerDims& d : layers) values += static_cast<size_t>(d.k_dim + d.v_dim);
  return values * static_cast<size_t>(n_seq * n_ctx) * sizeof(uint16_t);
}

}  // namespace herd::engine
