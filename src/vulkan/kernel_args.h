// What the files of Kernels (kernels.cpp, kernels_delta.cpp, kernels_ds4.cpp) share to fill
// push constants and count workgroups. Private to src/vulkan/.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "util/error.h"

namespace herd::vulkan::detail {

// Shaders index with 32-bit unsigned integers.
inline uint32_t u32(int64_t value, const char* what) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max()) {
    throw Error("vulkan", std::string(what) + " " + std::to_string(value) +
                              " is beyond the shaders' 32-bit indices");
  }
  return static_cast<uint32_t>(value);
}

inline uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

}  // namespace herd::vulkan::detail
