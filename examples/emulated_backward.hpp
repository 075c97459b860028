// The emulated backward pass of omgs-train-synthetic: each layer's backward is a Kokkos
// kernel that writes the gradient (a hash of rank, iteration, layer and index, centred on
// 0) after `reps` rounds of arithmetic per element, so that it lasts the layer's
// backward_s. In a named namespace: CUDA's extended lambdas need an enclosing function
// with external linkage.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include <omgs/omgs.hpp>

namespace omgs_train {

/// Writes the gradient of seed into grad after `reps` rounds of arithmetic per element.
void emulate_layer(const omgs::GradientView& grad, std::uint64_t seed, int reps);

/// Seconds per element of emulate_layer with 0 reps, and per extra rep per element.
struct KernelCost {
  double fill_s = 0, rep_s = 0;
};

/// Times the kernel on this device; the slowest rank's costs (collective), so that every
/// rank emulates the same times.
KernelCost calibrate_kernel(MPI_Comm comm);

/// Reps per element so that layer l's kernel lasts about scale x its backward_s.
std::vector<int> layer_reps(const std::vector<omgs::LayerSpec>& layers, const KernelCost& cost,
                            double scale);

/// The hash seed of a layer's gradient in one iteration on one rank.
std::uint64_t seed_of(int rank, int iteration, std::size_t layer);

}  // namespace omgs_train
