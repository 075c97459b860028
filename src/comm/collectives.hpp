// Internal: the small collective steps the runtime and the C API need. With the progress
// engine these are the only places in omgs that call MPI (docs/architecture.md).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <omgs/allreduce_form.hpp>
#include <omgs/comm.hpp>
#include <omgs/export.hpp>

namespace omgs::detail {

/// Throws omgs::Error "<who>: MPI is not initialized ..." / "... already finalized".
void require_mpi_active(const std::string& who);

/// True once MPI_Finalize has been called.
bool mpi_finalized() noexcept;

/// A duplicate of a communicator, freed on destruction (unless MPI is finalized by then).
class OwnedComm {
 public:
  OwnedComm() = default;
  /// Collective over `comm`. With errors_return the duplicate returns MPI errors as codes.
  explicit OwnedComm(MPI_Comm comm, bool errors_return = false);
  /// Collective and bounded: check_arrival() (arrival.hpp: throws omgs::Error naming the
  /// ranks that did not arrive within `timeout_s`), then a non-blocking duplicate
  /// (MPI_Comm_idup) waited for at most `timeout_s`.
  OwnedComm(MPI_Comm comm, double timeout_s, const std::string& who);
  ~OwnedComm();
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;

  MPI_Comm get() const noexcept { return comm_; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

/// Runs `on_finalize` at the start of MPI_Finalize (MPI deletes the attributes of
/// MPI_COMM_SELF first, while MPI is still usable), unless destroyed before.
class FinalizeHook {
 public:
  explicit FinalizeHook(std::function<void()> on_finalize);
  ~FinalizeHook();
  FinalizeHook(const FinalizeHook&) = delete;
  FinalizeHook& operator=(const FinalizeHook&) = delete;

 private:
  static int on_delete(MPI_Comm, int, void*, void* extra) noexcept;
  std::function<void()> fn_;
  int keyval_ = MPI_KEYVAL_INVALID;
};

/// Collective: every rank passes its own verdict ("" for none). If any rank failed, every
/// rank throws omgs::Error: its own message, or "<who>: another rank rejected its input
/// (rank R, ...)" naming the lowest failing rank. No rank throws alone before a collective.
void agree_on_error(MPI_Comm comm, const std::string& local_error, const std::string& who);

/// Collective: elementwise max and min over ranks of x (one allreduce).
void max_min(MPI_Comm comm, const std::vector<std::uint64_t>& x, std::vector<std::uint64_t>& mx,
             std::vector<std::uint64_t>& mn);

/// Collective: replaces every value by its maximum over ranks.
void max_over_ranks(MPI_Comm comm, std::vector<double>& values);

/// Collective: the mean over ranks of each value, computed on rank 0 (non-finite or
/// non-positive sums give 0) and broadcast, so every rank gets bit-identical results.
std::vector<double> mean_from_root(MPI_Comm comm, const std::vector<double>& values);

/// Waits for `req` polling it with MPI_Test and `idle`'s back-off between empty polls (a
/// spin, yields, then sleeps of IdleOptions::sleep_s while in flight), as the progress
/// thread waits for its collectives.
OMGS_EXPORT void wait_as_progress_thread(MPI_Request& req, const IdleOptions& idle = IdleOptions{});
/// Collective: a barrier waited for as wait_as_progress_thread waits (MPI_Ibarrier). The
/// timing loops separate their repetitions with it: a rank that reached MPI_Barrier first
/// busy-polls there, and where ranks share a core it holds the core that the slower rank needs
/// to finish its timed collective until the scheduler's tick (docs/model-check.md).
OMGS_EXPORT void barrier_as_progress_thread(MPI_Comm comm, const IdleOptions& idle = IdleOptions{});

/// Collective: how calibration waits for the collectives it times on this rank's layout (the
/// cores of its cpuset, shared by the ranks of its machine when the launcher did not bind
/// them apart, emulated hosts included: machine_ranks; compute_threads each). Where the layout
/// oversubscribes its cores, as the progress thread polls there (idle_for_layout: it sleeps at
/// once): a rank busy-polling on a core another rank needs holds it until the scheduler's tick,
/// which the runtime's posts do not pay (at two emulated hosts both ranks sat on one core and a
/// 1-pair allgather took 8 ms instead of 0.3 ms: docs/model-check.md, "The latency at two hosts").
/// Elsewhere busy (unbounded spinning, as MPI_Wait): on cores of its own a rank's busy wait costs
/// nobody.
OMGS_EXPORT IdleOptions progress_idle(MPI_Comm comm, int compute_threads);

/// Collective: `repetitions` timed MPI_Iallgatherv of `bytes_per_rank` bytes from every
/// rank, each between barriers (barrier_as_progress_thread) and waited for as the progress thread
/// does (wait_as_progress_thread with `idle`); returns the durations in seconds.
OMGS_EXPORT std::vector<double> time_allgather(MPI_Comm comm, std::size_t bytes_per_rank,
                                               int repetitions,
                                               const IdleOptions& idle = IdleOptions{});

/// Collective: `repetitions` timed allreduces (MPI_SUM) of `floats` floats in `form`, each
/// between barriers (barrier_as_progress_thread), a non-blocking one waited for as the progress
/// thread does (wait_as_progress_thread); returns the durations in seconds (the dense groups'
/// collective; allreduce_form.cpp).
OMGS_EXPORT std::vector<double> time_allreduce_form(MPI_Comm comm, std::size_t floats,
                                                    int repetitions, AllreduceForm form,
                                                    const IdleOptions& idle = IdleOptions{});

/// Whether a progress engine created now would run a progress thread: MPI provides
/// MPI_THREAD_SERIALIZED or above and `force_inline` is off (local).
bool progress_thread_available(bool force_inline);
/// Collective: times `repetitions` sparse allreduces (detail::SparseAllreduce of a group of
/// `numel` elements, about `k` survivors) of this rank's `pairs`, each after a barrier, the
/// first one more as a warm-up; throws omgs::Error naming the step if one does not complete
/// within timeout_s. The times are this rank's.
std::vector<double> time_sparse_allreduce(MPI_Comm comm, std::uint64_t numel, std::uint64_t k,
                                          const std::vector<SparsePair>& pairs, int repetitions,
                                          double timeout_s);
/// The largest tag `comm` allows (its MPI_TAG_UB attribute; at least 32767).
int tag_upper_bound(MPI_Comm comm);

/// This rank's rank and the size of `comm`.
std::pair<int, int> rank_and_size(MPI_Comm comm);

/// Collective: how many ranks of comm share this rank's node (MPI_COMM_TYPE_SHARED), >= 1.
int ranks_on_node(MPI_Comm comm);

/// Prints nothing; ends every process of the job with `code` (on_timeout = abort).
[[noreturn]] void abort_job(MPI_Comm comm, int code) noexcept;

}  // namespace omgs::detail
