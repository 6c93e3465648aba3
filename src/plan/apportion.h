// Sharing work out in proportion to speed, within limits, in whole units. Two steps:
// share_by_speed() gives each rank a real fraction (water-filling under per-rank caps),
// split_ranges() turns fractions into contiguous integer ranges whose sizes differ from
// the exact shares by less than one unit and always add up to the whole. Rounding each
// rank's share on its own would not add up (the "pipeline split formula that dropped
// layers"); rounding the cumulative boundaries does, by construction.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace herd {

// Fractions f[r] = min(cap[r], lambda * speed[r]) with sum f = 1: shares proportional to
// speed, except that a rank never gets more than its cap, and what it cannot take goes to
// the others in proportion to their speeds. nullopt when the caps add up to less than 1.
// REQUIRES: speed[r] > 0, cap.size() == speed.size(). Negative caps count as 0.
std::optional<std::vector<double>> share_by_speed(const std::vector<double>& speed,
                                                  const std::vector<double>& cap);

// Boundaries b[0] = 0 <= b[1] <= ... <= b[T] = n of T contiguous ranges of [0, n): range r
// is [b[r], b[r+1]). Every boundary is a multiple of `unit`, and each range's size is
// within one unit of fraction[r] * n. REQUIRES: n % unit == 0, fractions >= 0 adding up
// to 1 (up to rounding).
std::vector<int64_t> split_ranges(int64_t n, int64_t unit, const std::vector<double>& fraction);

}  // namespace herd
