#include "util/cpu_info.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(CpuInfo, DefaultThreadsArePerformanceCoresWhenKnown) {
  EXPECT_EQ(default_thread_count(CpuCores{14, 10, 4}), 10);  // M4 Pro 14-core
  EXPECT_EQ(default_thread_count(CpuCores{10, 4, 6}), 4);    // M4
  EXPECT_EQ(default_thread_count(CpuCores{8, 0, 0}), 8);     // kinds unknown: all
  EXPECT_EQ(default_thread_count(CpuCores{0, 0, 0}), 1);
  EXPECT_EQ(default_thread_count(CpuCores{2, 4, 0}), 2);  // never above the logical count
}

TEST(CpuInfo, TextCountsKindsApart) {
  EXPECT_EQ(cpu_cores_text(CpuCores{14, 10, 4}), "14 cores (10 performance, 4 efficiency)");
  EXPECT_EQ(cpu_cores_text(CpuCores{8, 8, 0}), "8 cores (8 performance)");
  EXPECT_EQ(cpu_cores_text(CpuCores{2, 0, 0}), "2 cores");
  EXPECT_EQ(cpu_cores_text(CpuCores{1, 0, 0}), "1 core");
}

TEST(CpuInfo, ThisMachineHasACore) {
  const CpuCores c = cpu_cores();
  EXPECT_GE(c.logical, 1);
  EXPECT_GE(default_thread_count(), 1);
  EXPECT_LE(c.performance + c.efficiency, c.logical);
}

}  // namespace
}  // namespace herd
