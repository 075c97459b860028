// omgs-train-mlp's training state: the data and buffers every run shares (Problem) and one
// run's parameters and gradient slots (Run). examples/train_mlp.cpp trains the runs.
#pragma once

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <omgs/omgs.hpp>

#include "mlp_network.hpp"

namespace omgs_train_mlp {

/// The data and buffers shared by every run.
struct Problem {
  Shapes shapes;
  int batch, iters;  // iterations per epoch: samples / batch (the rest is not used)
  Matrix x, eval_x;  // this rank's shard, the shared evaluation set
  Labels y, eval_y;
  int eval_begin, eval_count;  // the rows of the evaluation set this rank evaluates
  Activations act, eval_act;
  Vec sample_loss;  // per sample of this epoch
  MPI_Comm comm;
  int size;

  ConstMatrixRef batch_x(int it) const {
    return ConstMatrixRef(x.data() + static_cast<std::size_t>(it) * batch * x.extent(1), batch,
                          x.extent(1));
  }
};

/// One run's state: its parameters and gradient slots.
struct Run {
  Vec params;
  std::array<omgs::GradientView, num_tensors> grads;
  std::array<omgs::ConstGradientView, num_tensors> aggregated;  // sparse run
  std::array<Vec, num_tensors> tensors;                         // slices of params
  double train_s = 0;
  double loss = 0;
  double eval_acc = 0;
};

/// r's parameters: the same initial weights in every run (init_params with `seed`), and
/// their per-tensor slices.
inline void init_run(Run& r, const std::string& label, const Shapes& s, std::uint32_t seed) {
  r.params = Vec(label, s.total);
  init_params(r.params, s, seed);
  for (int t = 0; t < num_tensors; ++t)
    r.tensors[t] = Kokkos::subview(r.params, std::make_pair(s.offset[t], s.offset[t] + s.numel[t]));
}

}  // namespace omgs_train_mlp
