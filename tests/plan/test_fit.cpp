// The pure statistics of calibration (src/plan/fit.hpp), without MPI or Kokkos.
#include <vector>

#include "omgs_catch.hpp"
#include "plan/fit.hpp"

using omgs::detail::fit_nonnegative;
using omgs::detail::LinearFit;
using omgs::detail::median;

TEST_CASE("the linear fit recovers an exact line", "[plan][fit]") {
  const LinearFit f = fit_nonnegative({1, 2, 3, 4}, {3, 5, 7, 9});  // y = 1 + 2x
  CHECK(f.c0 == Approx(1.0));
  CHECK(f.c1 == Approx(2.0));
}

TEST_CASE("a negative intercept refits through the origin", "[plan][fit]") {
  // Least squares gives y = -2 + 2x; constrained: y = c1 x with c1 = sxy / sxx.
  const LinearFit f = fit_nonnegative({1, 2, 3}, {0, 2, 4});
  CHECK(f.c0 == 0.0);
  CHECK(f.c1 == Approx((0.0 + 4.0 + 12.0) / (1.0 + 4.0 + 9.0)));
}

TEST_CASE("a negative slope gives the mean as a constant", "[plan][fit]") {
  const LinearFit f = fit_nonnegative({1, 2, 3}, {6, 4, 2});
  CHECK(f.c1 == 0.0);
  CHECK(f.c0 == Approx(4.0));
}

TEST_CASE("a single point or equal x goes through the origin", "[plan][fit]") {
  const LinearFit one = fit_nonnegative({2}, {4});
  CHECK(one.c0 == 0.0);
  CHECK(one.c1 == Approx(2.0));
  const LinearFit same = fit_nonnegative({2, 2}, {1, 3});  // c1 = sxy / sxx = 8 / 8
  CHECK(same.c0 == 0.0);
  CHECK(same.c1 == Approx(1.0));
  const LinearFit zero = fit_nonnegative({0, 0}, {1, 3});  // nothing to fit: zero
  CHECK(zero.c0 == 0.0);
  CHECK(zero.c1 == 0.0);
}

TEST_CASE("median takes the upper middle element", "[plan][fit]") {
  CHECK(median({3.0}) == 3.0);
  CHECK(median({5.0, 1.0, 3.0}) == 3.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 3.0);
}
