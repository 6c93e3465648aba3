// Buffers, uploads and downloads, and the recorder: several dispatches with barriers in one
// submission, submitted again, and out-of-memory errors that name the numbers.
#include "vulkan/recorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

#include "util/error.h"
#include "vulkan/bandwidth.h"
#include "vulkan/kernels.h"
#include "vulkan/test_device.h"

namespace herd::vulkan {
namespace {

TEST(VulkanBuffers, RoundTripThroughEveryKind) {
  HERD_TEST_VULKAN_CONTEXT(context);
  std::vector<uint8_t> data(1001);
  std::iota(data.begin(), data.end(), uint8_t(7));
  for (BufferKind kind : {BufferKind::kDevice, BufferKind::kStaging}) {
    Buffer buffer(context, data.size() + 16, kind, "test data");
    upload(context, buffer, data.data(), data.size(), 16);
    std::vector<uint8_t> back(data.size());
    download(context, buffer, back.data(), back.size(), 16);
    EXPECT_EQ(back, data);
    Buffer moved = std::move(buffer);
    EXPECT_EQ(buffer.handle(), VkBuffer(VK_NULL_HANDLE));
    download(context, moved, back.data(), 5, 16);
    EXPECT_EQ(back[4], data[4]);
  }
  if (context.info().unified_memory) {
    EXPECT_NE(Buffer(context, 64, BufferKind::kDevice).mapped(), nullptr);  // no staging copy
  }
}

TEST(VulkanBuffers, OutOfMemoryNamesTheDeviceAndTheBytes) {
  HERD_TEST_VULKAN_CONTEXT(context);
  uint64_t largest = 0;
  for (const MemoryHeap& h : context.info().heaps) largest = std::max(largest, h.bytes);
  const size_t asked = static_cast<size_t>(largest) * 2;
  try {
    Buffer too_big(context, asked, BufferKind::kDevice, "the test's weights");
    FAIL() << "allocated " << asked << " bytes";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[vulkan] " + context.info().name + ": out of device memory"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("the test's weights"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(asked) + " bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("heap"), std::string::npos) << message;
  }
}

// h = rms_norm(a + b) * w, then h = h + a, then silu(h) * b: three kinds of dispatch, each
// reading what the one before wrote, recorded once and submitted twice over new inputs.
TEST(VulkanRecorder, ManyDispatchesInOneSubmission) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& kernels = *herd_test_device.kernels;
  const int64_t n = 3000;
  Buffer a(context, n * 4, BufferKind::kDevice), b(context, n * 4, BufferKind::kDevice);
  Buffer w(context, n * 4, BufferKind::kDevice), h(context, n * 4, BufferKind::kDevice);
  Buffer out(context, n * 4, BufferKind::kDevice);
  std::vector<float> va(n), vb(n), vw(n);
  const auto fill = [&](float shift) {
    for (int64_t i = 0; i < n; ++i) {
      va[i] = std::sin(float(i) * 0.37f) + shift;
      vb[i] = std::cos(float(i) * 0.11f) * 2.0f;
      vw[i] = 1.0f + float(i % 5) * 0.1f;
    }
    upload(context, a, va.data(), n * 4);
    upload(context, b, vb.data(), n * 4);
    upload(context, w, vw.data(), n * 4);
  };
  const auto expected = [&]() {
    std::vector<float> e(n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      e[i] = va[i] + vb[i];
      sum += double(e[i]) * e[i];
    }
    const float scale = float(1.0 / std::sqrt(sum / double(n) + 1e-6));
    for (int64_t i = 0; i < n; ++i) {
      const float g = e[i] * scale * vw[i] + va[i];
      e[i] = g / (1.0f + std::exp(-g)) * vb[i];
    }
    return e;
  };

  Recorder r(context);
  r.begin();
  kernels.add(r, a, b, h, n);
  kernels.rms_norm(r, h, w, h, n, 1, 1e-6f);
  kernels.add(r, h, a, h, n);
  kernels.silu_mul(r, h, b, out, n);
  EXPECT_EQ(r.n_dispatches(), 4u);
  for (float shift : {0.0f, 0.5f}) {
    fill(shift);
    r.submit_and_wait();
    std::vector<float> y(n);
    download(context, out, y.data(), n * 4);
    const std::vector<float> e = expected();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(y[i], e[i], 1e-5 * (1 + std::fabs(e[i]))) << "shift " << shift << ", i " << i;
    }
  }
}

// More dispatches than one descriptor pool holds, and bindings at offsets into one buffer.
TEST(VulkanRecorder, GrowsItsDescriptorPoolsAndBindsAtOffsets) {
  HERD_TEST_VULKAN_CONTEXT(context);
  Kernels& kernels = *herd_test_device.kernels;
  const size_t align = std::max<size_t>(context.limits().minStorageBufferOffsetAlignment, 4);
  const int64_t n = int64_t(align / 4) * 4;  // each slice a multiple of the alignment
  Buffer x(context, size_t(n) * 4 * 2, BufferKind::kDevice);
  std::vector<float> ones(size_t(n) * 2, 1.0f);
  upload(context, x, ones.data(), ones.size() * 4);
  Recorder r(context);
  for (int round = 0; round < 2; ++round) {  // begin() again reuses the pools
    upload(context, x, ones.data(), ones.size() * 4);
    r.begin();
    const int steps = 1200;
    for (int i = 0; i < steps; ++i) {
      // second half += first half
      kernels.add(r, Binding(x, 0, size_t(n) * 4), Binding(x, size_t(n) * 4, size_t(n) * 4),
                  Binding(x, size_t(n) * 4, size_t(n) * 4), n);
    }
    r.submit_and_wait();
    std::vector<float> y(size_t(n) * 2);
    download(context, x, y.data(), y.size() * 4);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[size_t(n)], float(1 + steps));
    EXPECT_EQ(y.back(), float(1 + steps));
  }
}

// A binding larger than the device's maxStorageBufferRange (lavapipe: 128 MiB) is an error
// that says so, not a shader reading garbage.
TEST(VulkanRecorder, RefusesABindingBeyondTheDevicesRange) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const uint64_t range = context.limits().maxStorageBufferRange;
  if (range >= (1ull << 30)) GTEST_SKIP() << "the device binds " << range << " bytes at once";
  Buffer big(context, size_t(range) + 1024, BufferKind::kDevice, "big");
  Recorder r(context);
  r.begin();
  try {
    herd_test_device.kernels->add(r, big, big, big, 16);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one binding holds at most " + std::to_string(range)),
              std::string::npos)
        << e.what();
  }
  herd_test_device.kernels->add(r, Binding(big, 0, 64), Binding(big, 0, 64), Binding(big, 0, 64),
                                16);  // a part is fine
  r.submit_and_wait();
}

// Copies recorded between dispatches: each command sees what the one before it wrote.
TEST(VulkanRecorder, CopiesBetweenDispatches) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const int64_t n = 100;
  std::vector<float> ones(size_t(n), 1.0f);
  Buffer a(context, size_t(n) * 4, BufferKind::kDevice),
      b(context, size_t(n) * 4, BufferKind::kDevice);
  upload(context, a, ones.data(), ones.size() * 4);
  Recorder r(context);
  r.begin();
  herd_test_device.kernels->add(r, a, a, a, n);  // a = 2
  r.copy(a, 0, b, 0, size_t(n) * 4);             // b = 2
  herd_test_device.kernels->add(r, a, b, a, n);  // a = 4
  r.copy(a, 0, b, 4, size_t(n - 1) * 4);         // b = 2, 4, 4, ...
  r.submit_and_wait();
  std::vector<float> y(static_cast<size_t>(n));
  download(context, b, y.data(), y.size() * 4);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], 4.0f);
  EXPECT_EQ(y.back(), 4.0f);
}

TEST(VulkanRecorder, MeasuresCopyBandwidth) {
  HERD_TEST_VULKAN_CONTEXT(context);
  const CopyBandwidth bw = measure_copy_bandwidth(context, size_t(8) << 20, 4);
  EXPECT_EQ(bw.copies, 4);
  EXPECT_GT(bw.seconds, 0.0);
  EXPECT_GT(bw.gb_per_s, 0.0);
  std::printf("%s: copy bandwidth %.1f GB/s (4 copies of 8 MiB)\n", context.info().name.c_str(),
              bw.gb_per_s);
}

}  // namespace
}  // namespace herd::vulkan
