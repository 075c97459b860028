// omgs-train-mlp's command line: its options and their checks (examples/train_mlp.cpp runs
// the training).
#pragma once

#include <cstdint>

#include <omgs/gradient_type.hpp>

namespace omgs_train_mlp {

/// The parsed command line (defaults as in --help).
struct Args {
  int epochs = 8;
  int batch = 64;
  int hidden = 128;
  int classes = 10;
  int dim = 32;
  int samples = 4096;
  double density = 0.05;
  double lr = 0.1;
  double noise = 2.0;  // samples = centre + N(0, noise^2) per coordinate
  double tolerance_pct = 5.0;
  double bucket_mb = 25.0;  // dense-bucket's bucket size, MB of floats
  std::uint32_t seed = 42;
  bool quiet = false;
  /// The sparse run's gradients: fp32, or kept in bf16 / fp16 (rounded from the gemm's fp32
  /// output) with the runtime's 16-bit views and the optimizer reading its 16-bit aggregate.
  omgs::GradientType gradient_type = omgs::GradientType::fp32;
};

/// Parses argv; returns -1 to go on, 0 after --help, 2 on a bad argument (rank 0 prints).
/// --collective-timeout sets omgs_examples::job_bound.timeout_s.
int parse_args(int argc, char** argv, int rank, Args& a);

}  // namespace omgs_train_mlp
