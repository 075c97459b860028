// How a sum allreduce of floats is called, and a short start-up measurement that picks the
// fastest of the forms the MPI offers without any environment variable (docs/comm.md,
// "The dense allreduce's form"). MPI's algorithm differs between its calls: Open MPI's
// libnbc MPI_Iallreduce and its tuned MPI_Allreduce pick different algorithms for the same
// message, so the runtime's dense groups and the examples' dense baselines measure both,
// and, where the MPI lets a running process change an algorithm through an MPI_T control
// variable, the settings of a small table (allreduce_settings()).
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

/// An allreduce algorithm that a running process may pick by writing an MPI_T control
/// variable (an int) after MPI_Init. Which ones exist, and which MPIs refuse it, is in
/// docs/comm.md ("MPI_T control variables").
struct AllreduceSetting {
  std::string_view cvar;   ///< e.g. "coll_libnbc_iallreduce_algorithm"
  int value = 0;           ///< written to it, e.g. 1
  std::string_view label;  ///< e.g. "libnbc ring"
};
/// The bounded table the chooser tries (Open MPI's libnbc MPI_Iallreduce ring and
/// Rabenseifner); a setting is a candidate only where its variable exists and takes a write.
OMGS_EXPORT const std::vector<AllreduceSetting>& allreduce_settings();
/// Local: the indices into allreduce_settings() whose variable this process can write now
/// (it exists, is one int, its scope is not constant or read-only, and a write reads back).
OMGS_EXPORT std::vector<int> writable_allreduce_settings();
/// Local, process-wide: writes setting `s` (an index into allreduce_settings()) so that the
/// process's later MPI_Iallreduce calls use it, or with -1 puts every variable of the table
/// back to the value it had when omgs first read it. Returns false where a write failed.
/// Every rank of a communicator must apply the same setting (choose_allreduce_form does).
OMGS_EXPORT bool apply_allreduce_setting(int s);
/// The setting last applied (-1: none, the MPI's own choice).
OMGS_EXPORT int applied_allreduce_setting();

/// What choose_allreduce_form measured and chose; the same on every rank.
struct OMGS_EXPORT AllreduceFormChoice {
  AllreduceForm form = AllreduceForm::nonblocking;
  /// The setting chosen with it (an index into allreduce_settings(), applied by the chooser
  /// for the process); -1: none, the MPI's own algorithm.
  int setting = -1;
  std::size_t numel = 0;  ///< floats per allreduce timed
  /// Rank 0's median seconds per form (indexed by the form) with no setting applied; NaN for
  /// a form not timed.
  std::array<double, allreduce_forms> median_s{};
  /// Rank 0's median seconds per setting (indexed as allreduce_settings()), timed with
  /// setting_form; NaN for a setting not timed.
  std::vector<double> setting_median_s;
  AllreduceForm setting_form = AllreduceForm::nonblocking;
  /// e.g. "MPI_Iallreduce + libnbc ring (MPI_T): MPI_Iallreduce 1.22 s, MPI_Allreduce
  /// (blocking) 0.79 s, MPI_Iallreduce + libnbc ring 0.70 s (6.7e+07 B, MPI's auto)".
  std::string describe() const;
  /// e.g. "MPI_Iallreduce + libnbc ring (MPI_T)", or to_string(form) without a setting.
  std::string name() const;
};

/// Collective: times each of `candidates` (`trials` each, alternating, after one warm-up
/// each, every call after a barrier) on `numel` floats and returns the fastest by rank 0's
/// medians, broadcast so that every rank takes the same choice. A candidate is timed only
/// if every rank lists it (a rank that cannot block in MPI_Allreduce leaves it out). With
/// `settings`, each setting that every rank can write (writable_allreduce_settings()) is
/// timed too, with the nonblocking form (or the in-place one where that is the only
/// nonblocking candidate); the chosen setting, or none, is applied on return
/// (apply_allreduce_setting). Throws omgs::Error on an empty candidate list (on every rank
/// alike: the list is agreed first).
OMGS_EXPORT AllreduceFormChoice choose_allreduce_form(MPI_Comm comm, std::size_t numel, int trials,
                                                      const std::vector<AllreduceForm>& candidates,
                                                      bool settings = true);

/// The MPI's allreduce algorithm setting: the one applied through MPI_T (e.g. "libnbc ring
/// (MPI_T)"), else as far as the environment says (Open MPI's
/// OMPI_MCA_coll_libnbc_iallreduce_algorithm, MPICH's MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM);
/// "MPI's auto" when neither.
OMGS_EXPORT std::string describe_allreduce_setting();

}  // namespace omgs
