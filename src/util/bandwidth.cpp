#include "util/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace herd {

double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int passes) {
  const size_t n = buffer_bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[n]);
  // Touch every page from the threads that will read it (first-touch placement).
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) buffer[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()) * 8);  // a cache line each
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    auto start = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t begin, int64_t end, int thread) {
      // Four independent sums so the loads are not serialized on one add chain.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = begin;
      for (; i + 4 <= end; i += 4) {
        s0 += buffer[static_cast<size_t>(i)];
        s1 += buffer[static_cast<size_t>(i + 1)];
        s2 += buffer[static_cast<size_t>(i + 2)];
        s3 += buffer[static_cast<size_t>(i + 3)];
      }
      for (; i < end; ++i) s0 += buffer[static_cast<size_t>(i)];
      sinks[static_cast<size_t>(thread) * 8] += s0 + s1 + s2 + s3;
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / seconds);
  }
  // Keep the sums observable so the reads cannot be optimized away.
  volatile uint64_t sink = 0;
  for (uint64_t s : sinks) sink = sink + s;
  return best;
}

}  // namespace herd
