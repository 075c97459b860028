// The pure statistics of calibration (see fit.hpp).
#include "plan/fit.hpp"

#include <algorithm>

namespace omgs::detail {

LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  LinearFit f;
  const double den = n * sxx - sx * sx;
  if (den > 0) {
    f.c1 = (n * sxy - sx * sy) / den;
    f.c0 = (sy - f.c1 * sx) / n;
  }
  if (f.c0 < 0 || den <= 0) {  // through the origin
    f.c0 = 0;
    f.c1 = sxx > 0 ? sxy / sxx : 0;
  }
  if (f.c1 < 0) {
    f.c1 = 0;
    f.c0 = sy / n;
  }
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace omgs::detail
