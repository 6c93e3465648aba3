#include "util/large_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace herd {
namespace {

bool aligned(const void* p, size_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

TEST(LargePages, BigBuffersStartOnAHugePage) {
  const size_t huge = huge_page_bytes();
#if defined(__linux__)
  EXPECT_EQ(huge, size_t{2} << 20);
#endif
  const size_t bytes = (size_t{5} << 20) + 123;
  void* p = allocate_large(bytes, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, huge > 0 ? huge : 64));
  std::memset(p, 0x5a, bytes);  // all of it is ours
  EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
  std::free(p);
}

TEST(LargePages, SmallBuffersKeepTheirAlignment) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}}) {
    void* p = allocate_large(bytes, 64);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_TRUE(aligned(p, 64)) << bytes;
    std::free(p);
  }
}

}  // namespace
}  // namespace herd
