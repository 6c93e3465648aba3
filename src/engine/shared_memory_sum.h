// An all-reduce between tensor-parallel ranks that run as threads of one process: each
// rank's Shard gets a SharedMemoryRank, and their sums meet in one SharedMemorySum. Tests
// run a stage's ranks this way, without sockets.
#pragma once

#include <barrier>
#include <cstddef>
#include <vector>

#include "engine/all_reduce.h"

namespace herd::engine {

// The sum over T threads: each rank publishes its partial, all wait, each adds the
// partials up in rank order (so every rank gets bit-identical sums), and all wait again so
// that no partial is overwritten while another rank still reads it.
class SharedMemorySum {
 public:
  explicit SharedMemorySum(int n_ranks)
      : partials_(static_cast<size_t>(n_ranks)), barrier_(n_ranks) {}

  void sum(int rank, float* data, size_t n) {
    partials_[static_cast<size_t>(rank)].assign(data, data + n);
    barrier_.arrive_and_wait();
    for (size_t i = 0; i < n; ++i) {
      float total = 0;
      for (const std::vector<float>& p : partials_) total += p[i];
      data[i] = total;
    }
    barrier_.arrive_and_wait();
  }

 private:
  std::vector<std::vector<float>> partials_;  // [n_ranks][n]
  std::barrier<> barrier_;
};

class SharedMemoryRank final : public AllReduce {
 public:
  SharedMemoryRank(SharedMemorySum& shared, int rank) : shared_(shared), rank_(rank) {}
  void sum(float* data, size_t n) override { shared_.sum(rank_, data, n); }

 private:
  SharedMemorySum& shared_;
  int rank_;
};

}  // namespace herd::engine
