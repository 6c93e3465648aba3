#include "engine/shared_memory_sum.h"

#include <gtest/gtest.h>

#include <thread>

namespace herd::engine {
namespace {

TEST(SharedMemorySum, RanksGetTheSameSums) {
  SharedMemorySum shared(3);
  std::vector<std::vector<float>> data = {{1, 2}, {10, 20}, {100, 200}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < 50; ++round) {
        std::vector<float> mine = data[size_t(r)];
        shared.sum(r, mine.data(), mine.size());
        EXPECT_EQ(mine, (std::vector<float>{111, 222}));
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(SharedMemorySum, ARankThatFailsMidwayDoesNotLeaveTheOthersWaiting) {
  SharedMemorySum shared(2);
  std::thread waiter([&] {
    float x = 1;
    shared.sum(0, &x, 1);                       // both meet once
    EXPECT_THROW(shared.sum(0, &x, 1), Error);  // the other never comes: it failed
    EXPECT_THROW(shared.sum(0, &x, 1), Error);  // and later sums fail at once
  });
  float y = 2;
  shared.sum(1, &y, 1);
  EXPECT_EQ(y, 3);
  EXPECT_TRUE(shared.abort());  // rank 1 fails between sums
  EXPECT_FALSE(shared.abort());
  waiter.join();
  // Reset, both ranks sum again.
  shared.reset();
  std::thread again([&] {
    float x = 5;
    shared.sum(0, &x, 1);
    EXPECT_EQ(x, 12);
  });
  float z = 7;
  shared.sum(1, &z, 1);
  again.join();
  EXPECT_EQ(z, 12);
}

}  // namespace
}  // namespace herd::engine
