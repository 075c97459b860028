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
  std::string sparse_exchange = "allgather";  // RuntimeOptions::sparse_exchange
  std::vector<std::string> pair_wires;  // RuntimeOptions::pair_wire per row; empty: the default
  int rounds = 1;                       // each planner's rows (every wire) this many times
                   /// The fixed planners (open loop) and the runtime's default: mgs closed-loop.
  std::vector<std::string> planners = {"layerwise", "single", "mgs", "optimal", "mgs+loop"};
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

/// NAME -> a CSV: the path itself, $OMGS_MODELS_DIR/NAME.csv, <bin>/../share/omgs/models,
/// then the source tree's examples/models.
std::string find_model(const std::string& name, const char* argv0);

}  // namespace omgs_synthetic
