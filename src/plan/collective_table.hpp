// Internal: the planner's table of collectives, one row per collective a group can be given
// (docs/planner.md, "The table of collectives"). A row names its collective and says what it
// costs a group (time through the performance model, bytes on the wire, memory per rank),
// whether the model knows it and whether it can serve a group at all. predict(), MGS, the
// collective chooser, the optimal search and the exhaustive oracle read collectives only
// through these rows (and PlanRows below), so a new collective is one registered row.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/export.hpp>
#include <omgs/plan.hpp>

namespace omgs::detail {

/// One collective. The functions are all set (register_collective checks).
struct CollectiveRow {
  Collective id = Collective::sparse;  ///< set by register_collective
  std::string name;                    ///< to_string(id): the plan JSON's word
  /// The performance model's line that times it (PerfModel::collective_s: "allgather",
  /// "allreduce", "sparse_allreduce", or a name given to detail::register_line_bytes).
  /// A registered row with a line may leave time_s and known unset: they then ask the model
  /// by this name.
  std::string line;
  /// An error-feedback top-k precedes the exchange: the group pays PerfModel::topk_s on the
  /// compute stream. Without it the exchange starts when the group's backward ends.
  bool sparsifies = false;
  /// A plan all of whose groups use it is what a user gets without omgs' choice (dense data
  /// parallelism, an Ok-Topk-style sparse allreduce): choose_plan's near-ties never go
  /// above such a plan.
  bool baseline = false;
  /// Seconds of the exchange of a group of numel elements among `workers` ranks (k of its
  /// elements selected when it sparsifies): the model's prediction. May throw omgs::Error
  /// where the model does not know it.
  std::function<double(const PerfModel&, std::uint64_t numel, int workers, double density)> time_s;
  /// Whether the model predicts it for `workers` ranks.
  std::function<bool(const PerfModel&, int workers)> known;
  /// Bytes each rank moves on the wire (8-byte pairs, 4-byte gradient elements).
  std::function<double(std::uint64_t numel, int workers, double density)> wire_bytes;
  /// Bytes per rank the runtime allocates for the group's exchange (8-byte pairs).
  std::function<double(std::uint64_t numel, int workers, double density)> memory_bytes;
  /// The largest element count one MPI call of the exchange passes (an int in MPI): what its
  /// wires' set-up checks refuse past INT_MAX (tests/runtime/test_plan_posts.cpp holds every
  /// built-in row equal to them).
  std::function<std::uint64_t(std::uint64_t numel, int workers, double density)> max_mpi_count;
  /// The x the closed loop's refit fits the line on (fit_line: measured seconds against these
  /// bytes), with `pair_bytes` per pair in force when measured. Optional: unset, a row with a
  /// top-k is fitted on its line's registered table bytes, a row without is not refitted.
  std::function<double(std::uint64_t numel, int workers, double density, double pair_bytes)>
      fit_bytes;
  /// fit_bytes counts 8-byte pairs whatever the pair format in force, while the line's bytes
  /// count the format's (AlphaBetaModel::with_pair_bytes): the refit's beta is the line's
  /// times pair_bytes / 8 (the allgather, whose fit reads the engine's bytes received).
  bool fit_in_8_byte_pairs = false;
};

/// What a run lets one group's exchange use (PlanConfig::max_mpi_count, memory_budget_bytes
/// and max_group_numel; 0: no limit).
struct ServeLimits {
  std::uint64_t max_mpi_count = 0;
  std::uint64_t memory_budget_bytes = 0;
  std::uint64_t max_group_numel = 0;
  bool unlimited() const noexcept {
    return max_mpi_count == 0 && memory_budget_bytes == 0 && max_group_numel == 0;
  }
  /// Whether a group of numel elements is within max_group_numel (whatever its row).
  bool holds(std::uint64_t numel) const noexcept {
    return max_group_numel == 0 || numel <= max_group_numel;
  }
};
inline ServeLimits serve_limits(const PlanConfig& config) {
  return {config.max_mpi_count, config.memory_budget_bytes, config.max_group_numel};
}
/// The limits of a run on MPI's int counts (INT_MAX, as the wires' set-up checks refuse).
inline constexpr std::uint64_t mpi_int_count = 2147483647;

/// Whether `row` can serve a group of numel elements among `workers` ranks: the group is
/// within the run's element limit, and the row's largest MPI count and its memory per rank
/// are within the limits.
bool serves(const CollectiveRow& row, std::uint64_t numel, int workers, double density,
            const ServeLimits& limits);

/// Whether every group's collective serves it (within the config's limits).
bool serves_groups(const std::vector<LayerSpec>& layers, const std::vector<Group>& groups,
                   const PlanConfig& config);

/// Drops the candidate plans with a group that its collective cannot serve within the
/// config's limits (serves_groups), unless that would drop them all: the choosers (mixed,
/// automatic, the sweep's mixed) then never pick a start plan (MGS, dense with a layer too
/// big for its row) over a budget that another candidate keeps.
void drop_unserved(std::vector<Plan>& candidates, const std::vector<LayerSpec>& layers,
                   const PlanConfig& config);

/// Every row, indexed by id: the built-in ones (sparse, dense, sparse_allreduce,
/// allreduce_node, sparse_node), then the registered ones. Registration happens before planning (at
/// start-up, or at the start of a test): the table is not locked, and reading it while a row
/// is registered is a race.
/// Rows never move (their references stay valid).
OMGS_EXPORT const std::vector<CollectiveRow>& collective_rows();
/// The row of `c`; throws omgs::Error for an id no row has.
OMGS_EXPORT const CollectiveRow& collective_row(Collective c);
/// The row named `name`, or nullptr.
OMGS_EXPORT const CollectiveRow* find_collective_row(std::string_view name);
/// Adds a row with the next free id and returns that id (time_s and known from `line` where
/// unset). Throws omgs::Error on an empty or taken name, a function not set (and no line to
/// set it from), or a full table (256 ids). Not thread-safe (see above).
OMGS_EXPORT Collective register_collective(CollectiveRow row);

/// A row's choice for one group: its collective and communication time; `serves` false when
/// no row of the class can serve the group (then the fastest row of the class regardless).
struct RowPick {
  double comm_s = 0.0;
  Collective collective = Collective::sparse;
  bool serves = true;
};

/// The rows one planning call may use: allowed by the config, known to the model for P,
/// grouped into choice classes by their compute term (a row's compute term is the top-k or
/// nothing, so there are at most two): class 0 the rows with a top-k (if any), then the rows
/// without. Rows of one class share their compute time, and the pipeline's times are
/// monotone in a group's communication time, so each planner takes per group the fastest
/// row of each class (pick; ties to the lower id), exactly for every grouping.
class PlanRows {
 public:
  enum class Kinds { sparsifying, all, not_sparsifying };
  PlanRows(const PerfModel& model, const PlanConfig& config, Kinds kinds);

  std::size_t classes() const { return classes_.size(); }
  /// Whether class c's rows have a top-k.
  bool sparsifies(std::size_t c) const { return classes_[c].sparsifies; }
  /// The fastest row of class c that serves a group of numel elements.
  RowPick pick(std::size_t c, std::uint64_t numel) const {
    const Class& k = classes_[c];
    if (k.rows.size() == 1 && unlimited_)  // the common case, inline: the searches' hot path
      return {k.rows.front()->time_s(model_, numel, workers_, density_), k.rows.front()->id, true};
    return pick_among(k, numel);
  }
  /// Whether some row of class c posts a group of numel elements within the run's element
  /// limit and MPI count limit (its max_mpi_count; the memory budget aside): MGS merges no
  /// two groups that each can be posted into one that cannot (its set-up would refuse it).
  bool posts(std::size_t c, std::uint64_t numel) const;
  /// The class with a top-k, or classes() if none is usable.
  std::size_t sparsifying_class() const;
  /// Throws omgs::Error if there is no class: the model's own error for the first allowed
  /// row it does not know (naming P), else one naming `who` and the kind of row it needs.
  void require(const std::string& who) const;

 private:
  struct Class {
    bool sparsifies = false;
    std::vector<const CollectiveRow*> rows;  // id order
  };
  RowPick pick_among(const Class& k, std::uint64_t numel) const;

  const PerfModel& model_;
  int workers_;
  double density_;
  ServeLimits limits_;
  bool unlimited_;  // no limit: every row serves every group
  Kinds kinds_;
  const CollectiveRow* first_unknown_ = nullptr;  // the first allowed row the model lacks
  std::vector<Class> classes_;
};

/// The largest number of classes PlanRows has.
inline constexpr std::size_t max_row_classes = 2;

/// Throws omgs::Error if the allowed collectives with a top-k are not empty and the model
/// knows none of them for config.workers (as asking for the sparse allreduce from a model
/// that cannot predict it), or if an allowed id has no row.
void check_collectives(const PerfModel& model, const PlanConfig& config);

/// The groups with each one's collective the fastest allowed row with a top-k that serves
/// it (the all-sparse planners' groupings: layerwise, single, threshold). Throws
/// omgs::Error if no such row is allowed and known (PlanRows::require).
std::vector<Group> with_sparse_rows(const std::vector<LayerSpec>& layers, std::vector<Group> groups,
                                    const PerfModel& model, const PlanConfig& config);

}  // namespace omgs::detail
