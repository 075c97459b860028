// omgs-train-synthetic's command line: its options, their checks and where a model's CSV is
// found (examples/train_synthetic.cpp runs the job).
#pragma once

#include <string>
#include <vector>

namespace omgs_synthetic {

/// The parsed command line (defaults as in --help).
struct Args {
  std::string model = "resnet50";
  int iterations = 10;
  int warmup = 2;
  double density = 0.001;
  /// RuntimeOptions::sparse_exchange per row; empty: the runtime's default.
  std::vector<std::string> sparse_exchanges;
  std::vector<std::string> pair_wires;  // RuntimeOptions::pair_wire per row; empty: the default
  /// --collectives: per row "flat", "node" or rows joined by '+' (synthetic_rows.hpp); empty:
  /// the runtime's own.
  std::vector<std::string> collectives;
  int ranks_per_node = 0;  // RuntimeOptions::ranks_per_node (0: by shared memory)
  int rounds = 1;          // every row this many times, a round after another
  /// The fixed planners (open loop) and "default": the runtime with nothing set.
  std::vector<std::string> planners = {"layerwise", "single", "mgs", "optimal", "default"};
  bool dense = true;
  double bucket_mb = 25.0;
  std::string perf = "calibrate";
  int calibrations = 3;
  std::string save_perf;
  int refit = 0;  ///< the closed loop's window; parse_args starts from RuntimeOptions's
  std::string save_fitted;
  double backward_scale = 1.0;
  double numel_scale = 1.0;
  std::string trace, svg;
  bool quiet = false;
  int test_leave = -1;
  double collective_timeout_s = 300.0;  // --collective-timeout
};

/// Parses argv; on a bad option prints one line on rank 0 and exits 2 on every rank (after
/// MPI_Finalize); --help prints the usage and exits 0.
Args parse_args(int argc, char** argv, int rank);

/// "mgs+loop": the planner run closed-loop.
bool closed_loop(const std::string& method);

/// The row of the runtime's defaults (RuntimeOptions{}: its planner closed-loop, its sparse
/// exchange and pair wire), whatever --sparse-exchange and --pair-wire say.
inline constexpr const char* default_method = "default";

/// The sparse exchange the shared calibration must time: automatic (both) when a row may use
/// the sparse allreduce, else allgather.
std::string calibration_exchange(const Args& args);

/// Whether a row may use a two-level exchange (a --collectives item "node" or naming
/// sparse_node or allreduce_node): the shared calibration must then time their lines.
bool needs_node_lines(const Args& args);

/// NAME -> a CSV: the path itself, $OMGS_MODELS_DIR/NAME.csv, <bin>/../share/omgs/models,
/// then the source tree's examples/models.
std::string find_model(const std::string& name, const char* argv0);

}  // namespace omgs_synthetic
