// An all-reduce between tensor-parallel ranks that run as threads of one process: each
// rank's Shard gets a SharedMemoryRank, and their sums meet in one SharedMemorySum. Tests
// run a stage's ranks this way, without sockets; so does the experts-on-the-CPU placement
// (cpu_experts.h), where one rank is a GPU's and may fail mid-forward (a lost device).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/all_reduce.h"
#include "util/error.h"

namespace herd::engine {

// The sum over T threads: each rank publishes its partial, all wait, each adds the
// partials up in rank order (so every rank gets bit-identical sums), and all wait again so
// that no partial is overwritten while another rank still reads it. A rank that fails
// between sums calls abort(): the others, waiting or arriving, throw instead of waiting for
// it forever, until reset().
class SharedMemorySum {
 public:
  explicit SharedMemorySum(int n_ranks)
      : partials_(static_cast<size_t>(n_ranks)), n_ranks_(n_ranks) {}

  void sum(int rank, float* data, size_t n) {
    partials_[static_cast<size_t>(rank)].assign(data, data + n);
    arrive_and_wait();
    for (size_t i = 0; i < n; ++i) {
      float total = 0;
      for (const std::vector<float>& p : partials_) total += p[i];
      data[i] = total;
    }
    arrive_and_wait();
  }

  // Wakes every rank in sum() and makes every later sum() throw herd::Error, until reset().
  // Returns whether this call was the first abort (the failure the others follow).
  bool abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool first = !aborted_;
    aborted_ = true;
    all_arrived_.notify_all();
    return first;
  }
  bool aborted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return aborted_;
  }
  // REQUIRES: no rank is inside sum().
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
  }

 private:
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (!aborted_ && ++arrived_ == n_ranks_) {
      arrived_ = 0;
      ++generation_;
      all_arrived_.notify_all();
      return;
    }
    all_arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) {
      throw Error("engine", "another rank of the all-reduce failed during the forward pass");
    }
  }

  std::vector<std::vector<float>> partials_;  // [n_ranks][n]
  const int n_ranks_;
  mutable std::mutex mutex_;
  std::condition_variable all_arrived_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
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
