// How a sum allreduce of floats is called, and a short start-up measurement that picks the
// fastest of the forms the MPI offers without any environment variable (docs/comm.md,
// "The dense allreduce's form"). MPI's algorithm differs between its calls: Open MPI's
// libnbc MPI_Iallreduce and its tuned MPI_Allreduce pick different algorithms for the same
// message, so the runtime's dense groups and the examples' dense baselines measure both.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/export.hpp>

namespace omgs {

/// How the runtime's dense groups are allreduced (RuntimeOptions::dense_allreduce).
enum class DenseAllreduce : std::uint8_t {
  automatic,    ///< whichever of the two a measurement at start-up finds faster
  nonblocking,  ///< MPI_Iallreduce, progressed by the driver beside the other groups
  blocking,     ///< MPI_Allreduce called by the progress thread (as Horovod's background thread)
};
OMGS_EXPORT std::string_view to_string(DenseAllreduce mode);
/// "automatic" | "nonblocking" | "blocking"; throws omgs::Error naming the value otherwise.
OMGS_EXPORT DenseAllreduce parse_dense_allreduce(std::string_view name);

/// One way to call the allreduce (MPI_SUM of floats).
enum class AllreduceForm : std::uint8_t {
  nonblocking_in_place,  ///< MPI_Iallreduce(MPI_IN_PLACE, buf, ...)
  nonblocking,           ///< MPI_Iallreduce with a separate send buffer
  /// MPI_Allreduce with a separate send buffer, by a thread that may block in it (in place,
  /// Open MPI 4.1's tuned component took 1.8x as long for 64 MiB: docs/comm.md)
  blocking,
};
inline constexpr std::size_t allreduce_forms = 3;
/// e.g. "MPI_Iallreduce in-place", "MPI_Allreduce (blocking)".
OMGS_EXPORT std::string_view to_string(AllreduceForm form);

/// What choose_allreduce_form measured and chose; the same on every rank.
struct OMGS_EXPORT AllreduceFormChoice {
  AllreduceForm form = AllreduceForm::nonblocking;
  std::size_t numel = 0;  ///< floats per allreduce timed
  /// Rank 0's median seconds per form (indexed by the form); NaN for a form not timed.
  std::array<double, allreduce_forms> median_s{};
  /// e.g. "MPI_Allreduce (blocking): 0.95 s vs MPI_Iallreduce 1.72 s (4e+07 B, MPI's auto)".
  std::string describe() const;
};

/// Collective: times each of `candidates` (`trials` each, alternating, after one warm-up
/// each, every call after a barrier) on `numel` floats and returns the fastest by rank 0's
/// medians, broadcast so that every rank takes the same choice. A candidate is timed only
/// if every rank lists it (a rank that cannot block in MPI_Allreduce leaves it out). Throws
/// omgs::Error on an empty candidate list (on every rank alike: the list is agreed first).
OMGS_EXPORT AllreduceFormChoice choose_allreduce_form(MPI_Comm comm, std::size_t numel, int trials,
                                                      const std::vector<AllreduceForm>& candidates);

/// The MPI's allreduce algorithm setting, as far as the environment says (Open MPI's
/// OMPI_MCA_coll_libnbc_iallreduce_algorithm, MPICH's MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM);
/// "MPI's auto" when unset.
OMGS_EXPORT std::string describe_allreduce_setting();

}  // namespace omgs
