#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "util/error.h"

namespace herd {
namespace {

TEST(ThreadPool, RunsEveryTaskOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(1000);
    pool.run(1000, [&](int64_t task, int thread) {
      ASSERT_LT(thread, 3);
      hits[task].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeInPieces) {
  ThreadPool pool(4);
  std::vector<int> seen(10, 0);
  pool.parallel_for(10, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) seen[i] += 1;
  });
  for (int s : seen) EXPECT_EQ(s, 1);
  pool.parallel_for(2, [&](int64_t begin, int64_t end, int) { EXPECT_EQ(end - begin, 1); });
}

TEST(ThreadPool, RethrowsTheFirstError) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(50,
                        [&](int64_t task, int) {
                          ran.fetch_add(1);
                          if (task == 7) throw Error("test", "task 7 failed");
                        }),
               Error);
  EXPECT_EQ(ran.load(), 50);
  // The pool still works afterwards.
  std::atomic<int> again{0};
  pool.run(10, [&](int64_t, int) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 10);
}

// Many tiny loops back to back on more threads than cores: the pattern of a decode step,
// under the preemption a shared machine brings. Must neither lose a task nor hang.
TEST(ThreadPool, StressManyShortRunsOversubscribed) {
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> total{0};
    int64_t expect = 0;
    for (int round = 0; round < 5000; ++round) {
      const int64_t n = 1 + round % 7;
      pool.run(n, [&](int64_t task, int) { total.fetch_add(task + 1, std::memory_order_relaxed); });
      expect += n * (n + 1) / 2;
    }
    EXPECT_EQ(total.load(), expect) << threads << " threads";
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  int64_t sum = 0;  // no atomics needed: everything runs on this thread
  pool.run(100, [&](int64_t task, int thread) {
    EXPECT_EQ(thread, 0);
    sum += task;
  });
  EXPECT_EQ(sum, 4950);
}

}  // namespace
}  // namespace herd
