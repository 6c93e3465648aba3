#include "net/payload_pool.h"

#include <gtest/gtest.h>

namespace herd::net {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(PayloadPoolTest, ReusesLargeBuffersOfASimilarSize) {
  auto pool = PayloadPool::create(8 * kMiB);
  uint8_t* first = nullptr;
  {
    PayloadStorage a = pool->allocate(4 * kMiB);
    first = a.get();
    a[4 * kMiB - 1] = 1;
  }
  PayloadStorage b = pool->allocate(3 * kMiB);  // fits, and not less than half the buffer
  EXPECT_EQ(b.get(), first);
  PayloadStorage c = pool->allocate(4 * kMiB);  // the cached one is taken: a new buffer
  EXPECT_NE(c.get(), first);
}

TEST(PayloadPoolTest, SmallFramesDoNotPinLargeBuffers) {
  auto pool = PayloadPool::create(64 * kMiB);
  uint8_t* large = nullptr;
  {
    PayloadStorage a = pool->allocate(16 * kMiB);
    large = a.get();
  }
  PayloadStorage small = pool->allocate(2 * kMiB);
  EXPECT_NE(small.get(), large);
  PayloadStorage tiny = pool->allocate(10);
  EXPECT_NE(tiny.get(), large);
}

TEST(PayloadPoolTest, CachesAtMostItsLimitAndOutlivesNothing) {
  auto pool = PayloadPool::create(2 * kMiB);
  PayloadStorage a = pool->allocate(2 * kMiB);
  PayloadStorage b = pool->allocate(2 * kMiB);
  a.reset();  // cached
  b.reset();  // over the limit: freed
  PayloadStorage c = pool->allocate(2 * kMiB);
  pool.reset();  // buffers still out are freed when their frames go (ASan checks this)
  c[0] = 1;
  c.reset();
  PayloadStorage heap = allocate_payload(0);
  SUCCEED();
}

}  // namespace
}  // namespace herd::net
