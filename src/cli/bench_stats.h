// Clock and statistics shared by herd bench's runs (bench.cpp, bench_speculative.cpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace herd::cli {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The middle value of v (the upper one of an even count); 0 when v is empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace herd::cli
