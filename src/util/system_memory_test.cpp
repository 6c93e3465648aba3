#include "util/system_memory.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(SystemMemory, MemAvailableIsReadInBytes) {
  constexpr const char* kMeminfo =
      "MemTotal:       16337452 kB\n"
      "MemFree:          812344 kB\n"
      "MemAvailable:   10404436 kB\n"
      "Buffers:          301032 kB\n";
  EXPECT_EQ(meminfo_available_bytes(kMeminfo), uint64_t{10404436} * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: 7 kB"), 7u * 1024);  // no final newline
}

TEST(SystemMemory, MissingOrMalformedMemAvailableIsZero) {
  EXPECT_EQ(meminfo_available_bytes(""), 0u);
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 100 kB\nMemFree: 50 kB\n"), 0u);  // old kernel
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: lots kB\n"), 0u);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: 100 MB\n"), 0u);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: 99999999999999999999 kB\n"), 0u);
  EXPECT_EQ(meminfo_available_bytes("XMemAvailable: 100 kB\n"), 0u);
}

TEST(SystemMemory, ThisMachineReportsSaneFigures) {
  const SystemMemory m = system_memory();
  EXPECT_GT(m.total_bytes, uint64_t{64} << 20);
  EXPECT_GT(m.available_bytes, 0u);
  EXPECT_LE(m.available_bytes, m.total_bytes);
#if defined(__APPLE__) && defined(__aarch64__)
  EXPECT_TRUE(m.unified);
#else
  EXPECT_FALSE(m.unified);
#endif
}

}  // namespace
}  // namespace herd
