// omgs-train-torch's command line: its options and their checks (examples/train_torch.cpp
// runs the training).
#pragma once

#include <string>

#include <omgs/plan.hpp>

namespace omgs_train_torch {

/// The example's CNN: conv k x k (channels1), relu, max-pool 2, conv k x k (channels2),
/// relu, max-pool 2, linear (hidden), relu, linear (10). --model picks one by name.
struct ModelShape {
  std::string name;
  long channels1, channels2, kernel, padding, hidden;
  /// The side of the feature map after both conv + pool stages, for in x in images.
  long side(long in) const {
    const long after1 = (in - kernel + 1 + 2 * padding) / 2;
    return (after1 - kernel + 1 + 2 * padding) / 2;
  }
};

/// "cnn" (80,202 parameters; compute-bound) or "wide_cnn" (3,226,570 parameters, nearly all in
/// fc1; communication-bound on 1 Gbit/s links, docs/torch.md); throws omgs::Error otherwise.
ModelShape model_shape(const std::string& name);

/// The parsed command line (defaults as in --help).
struct Args {
  int epochs = 3, batch = 64, max_batches = 0, warmup_epochs = 0;
  int test_images = 10000;  ///< the first N test images give the test accuracy
  long seed = 1;
  double density = 0.01, lr = 0.05, tolerance = 1.0;
  double momentum = 0.0;  // both runs; see momentum_correction
  /// The sparse run's momentum in omgs (RuntimeOptions::momentum; its optimizer then runs
  /// plain SGD) instead of in its optimizer, on the aggregated sparse gradient.
  bool momentum_correction = false;
  double warmup_density = 0.25, clip = 0.0;
  omgs::Planner planner = omgs::Planner::mgs;
  bool inline_progress = false;
  /// RuntimeOptions::pair_wire by name (pairs8, fp32, bf16, fp16); empty: the runtime's
  /// default (pairs8, or OMGS_PAIR_WIRE).
  std::string pair_wire;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  /// Where the dense run writes its first save_iterations gradients (empty: nowhere).
  std::string save_gradients;
  int save_iterations = 4;
  ModelShape model = model_shape("cnn");
  /// Where rank 0 writes one row per epoch and method (examples/epoch_csv.hpp; empty: nowhere).
  std::string csv;
};

/// Parses argv; returns -1 to go on, 0 after --help, 2 on a bad argument (rank 0 prints).
int parse_args(int argc, char** argv, int rank, int size, Args& a);

}  // namespace omgs_train_torch
