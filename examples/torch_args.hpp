// omgs-train-torch's command line: its options and their checks (examples/train_torch.cpp
// runs the training).
#pragma once

#include <string>

#include <omgs/plan.hpp>

namespace omgs_train_torch {

/// The parsed command line (defaults as in --help).
struct Args {
  int epochs = 3, batch = 64, max_batches = 0, warmup_epochs = 0;
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
};

/// Parses argv; returns -1 to go on, 0 after --help, 2 on a bad argument (rank 0 prints).
int parse_args(int argc, char** argv, int rank, int size, Args& a);

}  // namespace omgs_train_torch
