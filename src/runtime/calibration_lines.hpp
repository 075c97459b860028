// Internal: the calibration of the sparse allreduce (calibration.cpp), apart so that a test
// can time it on its own (tests/runtime/test_calibration_sparse.cpp).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include <omgs/export.hpp>

#include "plan/fit.hpp"

namespace omgs::detail {

/// Collective over comm: the standalone sparse allreduce (detail::SparseAllreduce) of a group
/// of `numel` elements (< 2^32) timed at each of `ks` (at least two, ascending, each <= numel):
/// a warm-up, then `repetitions` exchanges after a barrier, each the slowest rank's time, and
/// alpha + beta * AlphaBetaModel::sparse_allreduce_bytes fitted on the fastest of each k
/// (fit_latency_bandwidth; on one rank, which moves no bytes, the largest k's time as alpha).
/// Every rank returns the same fit. Throws omgs::Error if an exchange
/// does not complete within timeout_s.
OMGS_EXPORT LinearFit fit_sparse_allreduce(MPI_Comm comm, std::uint64_t numel,
                                           const std::vector<std::uint64_t>& ks,
                                           int repetitions = 5, double timeout_s = 30.0);

}  // namespace omgs::detail
