#include "engine/kv_cache.h"

namespace herd::engine {

KvCache::KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t kv_dim)
    : n_layer_(n_layer), n_seq_(n_seq), n_ctx_(n_ctx), kv_dim_(kv_dim) {
  const size_t n = static_cast<size_t>(n_layer * n_seq * n_ctx * kv_dim);
  k_.resize(n);
  v_.resize(n);
}

}  // namespace herd::engine
