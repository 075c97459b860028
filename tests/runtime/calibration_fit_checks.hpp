// What every calibrated line must be, whatever the exchange it times: finite, non-negative,
// and bit-identical on every rank (each rank fits the slowest rank's timings).
#pragma once

#include <mpi.h>

#include <cmath>

#include "omgs_catch.hpp"
#include "runtime/calibration_lines.hpp"

namespace omgs_test {

inline void check_agreed_fit(const omgs::detail::LinearFit& fit) {
  REQUIRE(std::isfinite(fit.c0));
  REQUIRE(std::isfinite(fit.c1));
  CHECK(fit.c0 >= 0.0);
  CHECK(fit.c1 >= 0.0);
  double mine[2] = {fit.c0, fit.c1}, lo[2], hi[2];
  MPI_Allreduce(mine, lo, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(mine, hi, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo[0] == hi[0]);
  CHECK(lo[1] == hi[1]);
}

}  // namespace omgs_test
