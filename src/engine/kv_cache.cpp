#include "engine/kv_cache.h"

namespace herd::engine {

KvCache::KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim)
    : n_layer_(n_layer), n_seq_(n_seq), n_ctx_(n_ctx), k_dim_(k_dim), v_dim_(v_dim) {
  const size_t cells = static_cast<size_t>(n_layer * n_seq * n_ctx);
  k_.resize(cells * static_cast<size_t>(k_dim));
  v_.resize(cells * static_cast<size_t>(v_dim));
}

}  // namespace herd::engine
