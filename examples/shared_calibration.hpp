// One performance model for every plan of an example job, so that predicted times are
// comparable across rows and plans do not move with calibration noise.
//
// The runtime's calibration (top-k on this device, allgather on this communicator; the
// maximum over ranks) is repeated `repeats` times; each coefficient is the median over
// the repeats, rounded to `digits` significant digits, so that the noise left in the
// median does not change the model (and hence the plan) from run to run. The planners
// themselves are untouched: for a given model they plan exactly as before.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include <omgs/omgs.hpp>

namespace omgs_examples {

/// The fitted coefficients of one calibration: top-k c0 + c1 * n, allgather alpha + beta * bytes.
struct Coefficients {
  double c0 = 0, c1 = 0, alpha = 0, beta = 0;
  double ar_alpha = 0, ar_beta = 0;      ///< the dense allreduce (per 4n bytes)
  double sar_alpha = 0, sar_beta = 0;    ///< the sparse allreduce (per wire byte), when timed
  double node_alpha = 0, node_beta = 0;  ///< the sparse node-summed exchange (per 4n), when timed
  double arn_alpha = 0, arn_beta = 0;    ///< the two-level dense allreduce (per 4n), when timed
};

struct Spread {
  double min = 0, median = 0, max = 0;
};

struct SharedModel {
  omgs::AlphaBetaModel model;  ///< identical on every rank
  std::vector<Coefficients> runs;
  Spread c0, c1, alpha, beta;
  Spread ar_alpha, ar_beta;
  Spread sar_alpha, sar_beta;    ///< zeros unless the sparse allreduce was timed
  Spread node_alpha, node_beta;  ///< zeros unless the two-level exchanges were timed
  Spread arn_alpha, arn_beta;
  double seconds = 0;  ///< all calibrations together
  /// The dense allreduce's form the first calibration chose (the later ones time the same),
  /// which the job's runtimes must use for the model's allreduce cost to hold.
  omgs::AllreduceFormChoice dense_allreduce;
};

/// Rounds v to `digits` significant decimal digits (0 stays 0).
double round_significant(double v, int digits);

/// min / median (the lower middle of an even count) / max. Throws omgs::Error when empty.
Spread spread_of(std::vector<double> v);

/// Calibrates `repeats` times on comm (collective; each is a layer-wise omgs::Runtime with
/// perf_model "calibrate"; the first chooses the dense allreduce's form, the others use it)
/// and forms the model from the rounded medians. With a sparse exchange other than allgather
/// the runtime's calibration times the sparse allreduce too, and the model carries its cost;
/// with `node_lines`, the two-level exchanges' lines ("sparse_node", "allreduce_node") on
/// nodes of `ranks_per_node` ranks (RuntimeOptions::ranks_per_node: 0 by shared memory) too.
SharedModel calibrate_shared(MPI_Comm comm, const std::vector<omgs::LayerSpec>& layers,
                             double density, int repeats, int digits = 2,
                             omgs::SparseExchange exchange = omgs::SparseExchange::allgather,
                             bool node_lines = false, int ranks_per_node = 0);

/// Writes the model to one temporary file (TMPDIR or /tmp) named by rank 0, under the same
/// path on every rank (the runtime checks that ranks agree on perf_model); a rank that does
/// not see rank 0's file writes the same text there. Collective; returns the path.
std::string write_job_model(MPI_Comm comm, const omgs::AlphaBetaModel& model);

/// Removes that file once every rank is done with it. Collective.
void remove_job_model(MPI_Comm comm, const std::string& path);

}  // namespace omgs_examples
