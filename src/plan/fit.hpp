// Internal: the pure statistics of calibration (no MPI, no Kokkos; tests/plan/test_fit.cpp).
#pragma once

#include <vector>

namespace omgs::detail {

/// y ~ c0 + c1 x with c0, c1 >= 0.
struct LinearFit {
  double c0 = 0.0, c1 = 0.0;
};

/// Least squares, then constrained: a negative intercept refits through the origin, a
/// negative slope gives the mean as a constant. x and y are of equal, non-zero length.
LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y);

/// The upper median (the element at size / 2 once sorted); v must not be empty.
double median(std::vector<double> v);

}  // namespace omgs::detail
