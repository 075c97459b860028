// The examples' median of a few timings: the middle value, the upper middle of an even
// count (shared_calibration.hpp's spread_of keeps the lower middle it documents).
#pragma once

#include <algorithm>
#include <vector>

#include <omgs/error.hpp>

namespace omgs_examples {

/// The element at index n/2 of `v` sorted. Throws omgs::Error when `v` is empty.
inline double median(std::vector<double> v) {
  if (v.empty()) throw omgs::Error("median: no values");
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace omgs_examples
