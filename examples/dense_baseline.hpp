// The dense baselines of the examples: what a data-parallel user without omgs runs.
//
//   dense-bucket  gradients fused into buckets of --bucket-mb (default 25 MB, as PyTorch
//                 DDP; the first one 1 MiB, as DDP's), filled in backward order (last
//                 layers first); each bucket is allreduced as soon as it is full, by a
//                 thread of its own (bucket_progress.hpp) while the rest of the backward
//                 pass runs. The form is whichever a short measurement at start-up finds
//                 fastest (omgs::choose_allreduce_form, the one the runtime's dense groups
//                 use; rank 0 decides, all ranks follow): MPI_Iallreduce in place or with a
//                 separate send buffer, or a blocking MPI_Allreduce called by that thread,
//                 as Horovod's background thread does.
//   dense-layer   one MPI_Iallreduce per layer, posted as soon as the layer's gradient exists.
//
// Where the gradient buffer is host memory (Serial, OpenMP) MPI reduces in it directly, as
// DDP's gradient_as_bucket_view: no copy; each bucket is averaged as soon as its allreduce
// completes. Device memory is staged through a host copy (no GPU-aware MPI assumed).
//
// MPI's choice of algorithm is the library's, and differs between the two calls: Open MPI
// 4.1's libnbc MPI_Iallreduce uses a binomial reduce + broadcast for P < 4 or in-place
// buffers unless OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 (ring), while its tuned
// MPI_Allreduce picks a ring for large messages. Measuring both at start-up gives a user who
// sets no variable the faster one; omgs::describe_allreduce_setting() names any variable set.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>
#include <omgs/omgs.hpp>

#include "bucket_progress.hpp"

namespace omgs_examples {

/// Layers [begin, end) (forward indices) fused into one allreduce.
struct Bucket {
  std::size_t begin = 0, end = 0;
};

/// PyTorch DDP's cap of the first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB): the
/// last layers' gradients go out while backward has barely begun.
inline constexpr double ddp_first_bucket_bytes = 1024.0 * 1024.0;

/// Buckets of bucket_bytes, filled from the last layer to the first, each closed by the
/// layer that makes it reach bucket_bytes (as DDP: a layer larger than that ends the bucket
/// it joins, alone only if that was empty); the first one (the last layers) is closed at
/// min(first_bucket_bytes, bucket_bytes) already, as DDP's; returned in backward order.
/// bucket_bytes == 0: one bucket per layer. Throws omgs::Error on an empty layer list.
std::vector<Bucket> make_buckets(const std::vector<std::uint64_t>& numel, double bucket_bytes,
                                 double first_bucket_bytes = 1e300);

/// The allreduce calls a dense run makes, and who progresses them.
struct AllreduceVariant {
  bool in_place = true;
  /// Progressed by a thread of the exchange's own (needs MPI_THREAD_MULTIPLE), else in the
  /// caller's ready() and finish() calls.
  bool progress_thread = false;
  /// A blocking MPI_Allreduce called by the progress thread instead of
  /// MPI_Iallreduce; only with progress_thread (inline it would stall the backward pass).
  bool blocking = false;
  /// The MPI_T setting chosen with it (omgs::allreduce_settings(); -1: the MPI's own), applied
  /// (process-wide) at each iteration's begin() so that exchanges of one job may differ.
  int setting = -1;
  /// e.g. "MPI_Iallreduce in-place (MPI's auto), progress thread"
  std::string describe() const;
};

/// omgs::choose_allreduce_form on `numel` floats (`trials` each) among MPI_Iallreduce in
/// place, with a separate send buffer and, where MPI provides MPI_THREAD_MULTIPLE (so a
/// progress thread can call it), a blocking MPI_Allreduce with a separate send buffer (in
/// place, Open MPI's tuned component is far slower for large messages), as the exchange's
/// variant; progress_thread is set where MPI provides MPI_THREAD_MULTIPLE. The same on every
/// rank; `choice` receives what was measured. Collective.
AllreduceVariant choose_allreduce(MPI_Comm comm, std::size_t numel, int trials,
                                  omgs::AllreduceFormChoice* choice = nullptr);

/// One timed iteration of a dense run, seconds (this rank).
struct DenseIteration {
  double iteration_s = 0;  ///< first layer's backward to averaged gradient on the device
  double wait_s = 0;       ///< after the last layer's backward: communication not hidden
};

/// A dense data-parallel gradient exchange over a flat device buffer of all layers. Either
/// iterate(produce), or per iteration: begin(), write each layer's gradient into
/// gradient(l) and call ready(l) from the last layer to the first, then finish().
class DenseExchange {
 public:
  /// Writes layer l's gradient into the given slot of the flat device buffer.
  using Produce = std::function<void(std::size_t l, const omgs::GradientView& slot)>;

  DenseExchange(MPI_Comm comm, const std::vector<std::uint64_t>& numel, std::vector<Bucket> buckets,
                AllreduceVariant variant);
  ~DenseExchange();
  DenseExchange(const DenseExchange&) = delete;  // its progress thread refers to it
  DenseExchange& operator=(const DenseExchange&) = delete;
  /// A barrier, then begin(), produce(l, gradient(l)) and ready(l) for every layer from the
  /// last to the first, then finish().
  DenseIteration iterate(const Produce& produce);
  /// Starts an iteration (its clock; no communication). Throws omgs::Error if the last one
  /// was not finished.
  void begin();
  /// Layer l's gradient is in gradient(l) (fences the execution space first; copied to host
  /// memory if it is device memory), and its bucket is MPI_Iallreduce'd if l is the
  /// bucket's lowest layer.
  /// Layers must come from the last to the first, after begin(); throws omgs::Error
  /// otherwise.
  void ready(std::size_t l);
  /// Waits for every bucket's allreduce and average over ranks (bounded: job_bound, else the
  /// job is aborted); flat() holds the average. Returns this rank's timings since begin().
  /// Throws omgs::Error without begin() or if not every layer was ready.
  DenseIteration finish();
  /// Layer l's slot of the flat device buffer (forward order).
  omgs::GradientView gradient(std::size_t l) const;
  /// The flat device buffer; after finish(), the averaged gradient of all layers.
  const omgs::GradientView& flat() const { return grad_; }
  /// A host copy of flat(): after finish(), the averaged gradient of all layers.
  std::vector<float> averaged() const;
  /// Whether MPI works on flat() itself (host memory) rather than on a host copy of it.
  static constexpr bool on_gradient =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, omgs::GradientView::memory_space>::accessible;
  std::size_t num_buckets() const { return buckets_.size(); }
  const AllreduceVariant& variant() const { return variant_; }

 private:
  MPI_Comm comm_;
  int size_ = 1;
  std::vector<std::size_t> offset_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_begin_;  ///< layer -> bucket it completes, or -1
  AllreduceVariant variant_;
  omgs::GradientView grad_;
  std::vector<float> send_, recv_;  ///< host staging / receive buffers, where needed
  float* send_base_ = nullptr;      ///< where MPI reads the layers' gradients
  float* recv_base_ = nullptr;      ///< where MPI writes the sums
  std::unique_ptr<BucketProgress> progress_;
  std::size_t next_ = 0;  ///< layers not yet ready this iteration are [0, next_)
  bool active_ = false;   ///< between begin() and finish()
  double t0_ = 0;

  void post(int b, MPI_Request* req);
  void average(int b);  ///< bucket b's sums into flat() (host) or recv_ (staged)
};

/// Buckets of bucket_mb MB of floats, the first one at most ddp_first_bucket_bytes (0: one
/// per layer, make_buckets), the allreduce variant chosen on the largest of them
/// (choose_allreduce, `trials` each) and the exchange over them. Collective.
DenseExchange make_dense_exchange(MPI_Comm comm, const std::vector<std::uint64_t>& numel,
                                  double bucket_mb, int trials = 3,
                                  omgs::AllreduceFormChoice* choice = nullptr);

/// Largest |a - b| / max(1, |a|) over the two vectors; +inf if their lengths differ.
double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace omgs_examples
