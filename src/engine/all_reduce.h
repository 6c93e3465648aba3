// AllReduce: what a tensor-parallel shard needs from its stage's other ranks. After the
// attention output projection and after the FFN down projection, each rank holds a partial
// [n][n_embd] sum over its heads / FFN rows / experts; the ranks add them up so that every
// rank continues with the full result. The engine sees only this interface (net depends on
// the engine, not the other way round); the cluster adapts its net::Collectives to it, and
// tests use an in-process one.
#pragma once

#include <cstddef>

namespace herd::engine {

class AllReduce {
 public:
  virtual ~AllReduce() = default;
  // data[0, n) becomes the element-wise sum over all ranks' data[0, n). Every rank of the
  // stage calls it the same number of times with the same n, in the same order.
  // Throws herd::Error when a peer fails (the forward pass then fails with it).
  virtual void sum(float* data, size_t n) = 0;
};

}  // namespace herd::engine
