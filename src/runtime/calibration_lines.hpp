// Internal: how calibration times each line of the performance model on the communicator
// (docs/planner.md, "Calibration"). A collective's line is timed at start-up when a
// calibration is registered for it under its line's name and the run may use one of its rows
// (or the calibration says it is always timed); the built-in lines (allgather, allreduce,
// sparse_allreduce) register in calibration_lines.cpp, another collective from its own files.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <omgs/allreduce_form.hpp>
#include <omgs/export.hpp>
#include <omgs/runtime.hpp>

#include "plan/fit.hpp"

namespace omgs::detail {

/// What a line's calibration may use: the run's communicator and its dense allreduce form,
/// and the report it may add its samples to (CalibrationReport's per-collective vectors).
struct CalibrationContext {
  MPI_Comm comm = MPI_COMM_NULL;
  int size = 1;
  AllreduceForm dense_form = AllreduceForm::nonblocking;
  CalibrationReport* report = nullptr;
  int ranks_per_node = 0;  ///< the run's node shape (RuntimeOptions::ranks_per_node)
  double density = 0.01;   ///< the run's density
  /// How a timed collective is waited for (progress_idle, comm/collectives.hpp).
  IdleOptions idle{};
  /// Each size's sample fitted: the median where idle sleeps at once (the ranks share cores).
  SampleStatistic statistic = SampleStatistic::fastest;
};

/// One line's calibration. `fit` is collective over the context's communicator and must give
/// every rank the same x values (the caller takes the maximum of the coefficients over ranks).
struct LineCalibration {
  /// Timed at every start-up, whatever the plan may use: the lines the model cannot be
  /// built without (allgather) or that every report compares with (the dense allreduce).
  bool always = false;
  std::function<LinearFit(const CalibrationContext&)> fit;
};

/// The registration: `line`'s calibration from now on (registering one again replaces it).
/// Thread-safe. Throws omgs::Error on an empty name or an unset fit.
OMGS_EXPORT void register_line_calibration(const std::string& line, LineCalibration calibration);
/// The lines to time for a run whose allowed rows time `lines`: those of them with a
/// registered calibration and every `always` one, by name (the order every rank times them).
OMGS_EXPORT std::map<std::string, LineCalibration> line_calibrations(
    const std::vector<std::string>& lines);

/// The allgather (`amount` bytes per rank) or allreduce (`amount` floats): a warm-up, then
/// rounds of three repetitions until nine are kept or those kept took `budget_s`. Each
/// repetition's time is the maximum over ranks, so every rank takes the same decisions and
/// fits the same points.
using CollectiveTimer = std::function<std::vector<double>(MPI_Comm, std::size_t, int)>;
std::vector<double> time_collective(MPI_Comm comm, std::size_t amount, double budget_s,
                                    const CollectiveTimer& timer);

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

/// Collective over comm: the sparse node-summed exchange (WireKind::sparse_node) of groups of
/// `sizes` elements (at least two, ascending) at `density`, in one ProgressEngine with
/// ranks_per_node (0: shared memory), each timed `repetitions` times after a warm-up from
/// submit to completion (the slowest rank's), alpha + beta * 4 n fitted on the fastest of each
/// size (fit_latency_bandwidth). Every rank returns the same fit. Throws omgs::Error if an
/// exchange does not complete within timeout_s.
OMGS_EXPORT LinearFit fit_sparse_node(MPI_Comm comm, int ranks_per_node, double density,
                                      const std::vector<std::uint64_t>& sizes, int repetitions = 5,
                                      double timeout_s = 30.0);

/// Collective over comm: the two-level dense allreduce (WireKind::allreduce_node) timed and
/// fitted as fit_sparse_node times the node-summed exchange (alpha + beta * 4 n).
OMGS_EXPORT LinearFit fit_allreduce_node(MPI_Comm comm, int ranks_per_node,
                                         const std::vector<std::uint64_t>& sizes,
                                         int repetitions = 5, double timeout_s = 30.0);

}  // namespace omgs::detail
