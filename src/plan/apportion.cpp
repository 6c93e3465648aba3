#include "plan/apportion.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace herd {

std::optional<std::vector<double>> share_by_speed(const std::vector<double>& speed,
                                                  const std::vector<double>& cap) {
  HERD_CHECK(speed.size() == cap.size() && !speed.empty());
  const size_t n = speed.size();
  std::vector<double> capped(n);
  double cap_sum = 0, speed_sum = 0;
  for (size_t r = 0; r < n; ++r) {
    HERD_CHECK(speed[r] > 0);
    capped[r] = std::max(0.0, cap[r]);
    cap_sum += std::min(1.0, capped[r]);
    speed_sum += speed[r];
  }
  if (cap_sum < 1.0) return std::nullopt;
  // Ranks in the order their caps bind first (the smallest cap per unit of speed); ties in
  // index order, so the result never depends on how a sort breaks them.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return capped[a] / speed[a] < capped[b] / speed[b]; });
  std::vector<double> fraction(n, 0.0);
  double remaining = 1.0;
  size_t first_free = 0;
  for (; first_free < n; ++first_free) {
    const size_t r = order[first_free];
    if (capped[r] >= remaining * speed[r] / speed_sum) break;
    fraction[r] = capped[r];
    remaining -= capped[r];
    speed_sum -= speed[r];
  }
  for (size_t i = first_free; i < n; ++i) {
    const size_t r = order[i];
    fraction[r] = remaining * speed[r] / speed_sum;
  }
  return fraction;
}

std::vector<int64_t> split_ranges(int64_t n, int64_t unit, const std::vector<double>& fraction) {
  HERD_CHECK(unit > 0 && n >= 0 && n % unit == 0 && !fraction.empty());
  const int64_t units = n / unit;
  std::vector<int64_t> bounds(fraction.size() + 1, 0);
  double cumulative = 0;
  for (size_t r = 0; r + 1 < fraction.size(); ++r) {
    cumulative += fraction[r];
    const int64_t b = std::llround(cumulative * static_cast<double>(units)) * unit;
    bounds[r + 1] = std::clamp(b, bounds[r], n);
  }
  bounds.back() = n;
  return bounds;
}

}  // namespace herd
