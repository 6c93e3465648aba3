// The device the Vulkan tests run on, opened once per test binary: device 0, or
// HERD_VULKAN_TEST_DEVICE's index (lavapipe, Mesa's CPU driver, where scripts/install-deps
// ran; a GPU where one is). Without one a test skips, or under CI=true fails, as
// tests/requires.sh does for end-to-end tests.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>

#include "util/error.h"
#include "vulkan/context.h"
#include "vulkan/kernels.h"

namespace herd::vulkan {

struct TestDevice {
  std::unique_ptr<Context> context;
  std::unique_ptr<Kernels> kernels;  // the device's choice of variants
  std::unique_ptr<Kernels> shared;   // the shared-memory reductions, forced
  std::string error;                 // why there is no context
};

inline TestDevice& test_device() {
  static TestDevice device = [] {
    TestDevice d;
    try {
      const char* index = std::getenv("HERD_VULKAN_TEST_DEVICE");
      d.context = Context::create(index != nullptr ? std::atoi(index) : 0);
      d.kernels = std::make_unique<Kernels>(*d.context);
      d.shared = std::make_unique<Kernels>(*d.context, KernelOptions{.subgroups = false});
    } catch (const Error& e) {
      d.error = e.what();
    }
    return d;
  }();
  return device;
}

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  std::string value(ci);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return value == "true" || value == "1" || value == "yes";
}

}  // namespace herd::vulkan

// At the top of a test: binds `context` (a Context&) or skips / fails the test.
#define HERD_TEST_VULKAN_CONTEXT(context)                                                     \
  ::herd::vulkan::TestDevice& herd_test_device = ::herd::vulkan::test_device();               \
  if (herd_test_device.context == nullptr) {                                                  \
    if (::herd::vulkan::under_ci()) {                                                         \
      FAIL() << "missing dependency: no Vulkan device (CI=true: a missing dependency fails, " \
                "it does not skip): "                                                         \
             << herd_test_device.error;                                                       \
    }                                                                                         \
    GTEST_SKIP() << "no Vulkan device: " << herd_test_device.error;                           \
  }                                                                                           \
  ::herd::vulkan::Context& context = *herd_test_device.context
