#include "engine/device_placement.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace herd::engine {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Four layers of 100 MiB (of which 80 MiB routed experts where moe), 10 MiB of cache each,
// a 50 MiB embedding and a 50 MiB head: 540 MiB in all, 220 MiB without the experts.
PartBytes four_layers(bool moe) {
  PartBytes p;
  p.layers.assign(4, 100 * kMiB);
  p.experts.assign(4, moe ? 80 * kMiB : 0);
  p.caches.assign(4, 10 * kMiB);
  p.embedding = 50 * kMiB;
  p.head = 50 * kMiB;
  return p;
}

TEST(DevicePlacement, APartThatFitsRunsWhollyOnTheDevice) {
  const DevicePlacement p =
      place_on_device(four_layers(true), 1000 * kMiB, 0.9, ExpertsChoice::kAuto, -1, "vulkan:0");
  EXPECT_EQ(p.kind, DevicePlacement::kDevice);
  EXPECT_EQ(p.device_bytes, 540 * kMiB);
  EXPECT_EQ(p.cpu_bytes, 0u);
}

TEST(DevicePlacement, AnMoePartThatOutgrowsTheDeviceKeepsItsExpertsOnTheCpu) {
  // 540 MiB does not fit 90% of 400 MiB; 220 MiB without the experts does.
  const DevicePlacement p =
      place_on_device(four_layers(true), 400 * kMiB, 0.9, ExpertsChoice::kAuto, -1, "vulkan:0");
  EXPECT_EQ(p.kind, DevicePlacement::kExpertsOnCpu);
  EXPECT_EQ(p.device_bytes, 220 * kMiB);
  EXPECT_EQ(p.cpu_bytes, 320 * kMiB);
  EXPECT_NE(p.why.find("routed experts"), std::string::npos) << p.why;
}

TEST(DevicePlacement, ADensePartThatOutgrowsTheDeviceIsSplitByLayers) {
  // 90% of 300 MiB = 270 MiB: the embedding (50) and two layers of 110 fit, not a third.
  const DevicePlacement p =
      place_on_device(four_layers(false), 300 * kMiB, 0.9, ExpertsChoice::kAuto, -1, "vulkan:0");
  EXPECT_EQ(p.kind, DevicePlacement::kFirstLayers);
  EXPECT_EQ(p.device_layers, 2);
  EXPECT_EQ(p.device_bytes, 270 * kMiB);
  EXPECT_EQ(p.cpu_bytes, 270 * kMiB);
}

TEST(DevicePlacement, AnMoePartTooBigEvenWithoutExpertsIsSplitByLayers) {
  const DevicePlacement p =
      place_on_device(four_layers(true), 200 * kMiB, 0.9, ExpertsChoice::kAuto, -1, "vulkan:0");
  EXPECT_EQ(p.kind, DevicePlacement::kFirstLayers);
  EXPECT_EQ(p.device_layers, 1);
  EXPECT_NE(p.why.find("even without its routed experts"), std::string::npos) << p.why;
}

TEST(DevicePlacement, TheUsersChoicesWinAndContradictionsAreRefused) {
  EXPECT_EQ(place_on_device(four_layers(true), 1000 * kMiB, 0.9, ExpertsChoice::kCpu, -1, "v").kind,
            DevicePlacement::kExpertsOnCpu);
  const DevicePlacement layers =
      place_on_device(four_layers(false), 1000 * kMiB, 0.9, ExpertsChoice::kAuto, 3, "v");
  EXPECT_EQ(layers.kind, DevicePlacement::kFirstLayers);
  EXPECT_EQ(layers.device_layers, 3);
  // All of them is the whole part.
  EXPECT_EQ(place_on_device(four_layers(false), 1, 0.9, ExpertsChoice::kAuto, 4, "v").kind,
            DevicePlacement::kDevice);
  // --experts device: a big MoE part is split by layers, its experts with them.
  EXPECT_EQ(
      place_on_device(four_layers(true), 400 * kMiB, 0.9, ExpertsChoice::kDevice, -1, "v").kind,
      DevicePlacement::kFirstLayers);
  EXPECT_THROW(place_on_device(four_layers(false), 1000 * kMiB, 0.9, ExpertsChoice::kCpu, -1, "v"),
               Error);
  EXPECT_THROW(place_on_device(four_layers(true), 1000 * kMiB, 0.9, ExpertsChoice::kCpu, 2, "v"),
               Error);
  EXPECT_THROW(parse_experts_choice("gpu"), Error);
}

}  // namespace
}  // namespace herd::engine
