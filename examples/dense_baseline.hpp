// The dense baselines of the examples: what a data-parallel user without omgs runs.
//
//   dense-bucket  gradients fused into buckets of --bucket-mb (default 25 MB, as PyTorch
//                 DDP), filled in backward order (last layers first); each bucket is
//                 MPI_Iallreduce'd as soon as it is full, overlapped with the rest of the
//                 backward pass. In-place or separate send buffer: whichever a short
//                 measurement at start-up finds faster (rank 0 decides, all ranks follow).
//   dense-layer   one MPI_Iallreduce per layer, posted as soon as the layer's gradient exists.
//
// MPI's choice of algorithm for MPI_Iallreduce is the library's: Open MPI 4.1's libnbc uses
// a binomial reduce + broadcast for P < 4 or in-place buffers unless
// OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 (ring); describe_allreduce() names it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <omgs/omgs.hpp>

namespace omgs_examples {

/// Layers [begin, end) (forward indices) fused into one allreduce.
struct Bucket {
  std::size_t begin = 0, end = 0;
};

/// Buckets of at most bucket_bytes (a layer larger than that is a bucket of its own),
/// filled from the last layer to the first; returned in that (backward) order.
/// bucket_bytes == 0: one bucket per layer. Throws omgs::Error on an empty layer list.
std::vector<Bucket> make_buckets(const std::vector<std::uint64_t>& numel, double bucket_bytes);

/// The allreduce calls a dense run makes.
struct AllreduceVariant {
  bool in_place = true;
  std::string describe() const;  ///< e.g. "MPI_Iallreduce in-place (libnbc auto)"
};

/// Times MPI_Iallreduce of `numel` floats in place and with a separate send buffer
/// (`trials` each, alternating, after one warm-up), and returns the faster by rank 0's
/// medians, broadcast so that every rank uses the same. Collective.
AllreduceVariant choose_allreduce(MPI_Comm comm, std::size_t numel, int trials,
                                  double* in_place_s = nullptr, double* separate_s = nullptr);

/// The library's allreduce algorithm setting, as far as the environment says
/// (Open MPI's OMPI_MCA_coll_libnbc_iallreduce_algorithm, MPICH's
/// MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM); "auto" when unset.
std::string describe_allreduce_setting();

/// One timed iteration of a dense run, seconds (this rank).
struct DenseIteration {
  double iteration_s = 0;  ///< first layer's backward to averaged gradient on the device
  double wait_s = 0;       ///< after the last layer's backward: communication not hidden
};

/// A dense data-parallel gradient exchange over a flat device buffer of all layers.
class DenseExchange {
 public:
  /// Writes layer l's gradient into the given slot of the flat device buffer.
  using Produce = std::function<void(std::size_t l, const omgs::GradientView& slot)>;

  DenseExchange(MPI_Comm comm, const std::vector<std::uint64_t>& numel, std::vector<Bucket> buckets,
                AllreduceVariant variant);
  /// Runs the backward pass from the last layer to the first, allreducing each bucket as
  /// soon as its last (lowest) layer is produced, then averages over ranks.
  DenseIteration iterate(const Produce& produce);
  /// The averaged gradient of the last iteration (host memory, all layers, forward order).
  const std::vector<float>& averaged() const { return recv_; }
  std::size_t num_buckets() const { return buckets_.size(); }

 private:
  MPI_Comm comm_;
  int size_ = 1;
  std::vector<std::size_t> offset_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_begin_;  ///< layer -> bucket it completes, or -1
  AllreduceVariant variant_;
  omgs::GradientView grad_;
  std::vector<float> send_, recv_;
};

/// Largest |a - b| / max(1, |a|) over the two vectors; +inf if their lengths differ.
double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace omgs_examples
