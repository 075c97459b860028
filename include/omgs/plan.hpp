// Module plan: layer descriptions, the pipeline timeline and the planners that group
// consecutive layers (MGS and its baselines); the performance models are in
// <omgs/perf_model.hpp>, which this header includes. Pure C++17: no MPI,
// no Kokkos, so it is usable (and tested) on its own.
#pragma once

#include <bitset>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/error.hpp>
#include <omgs/export.hpp>
#include <omgs/perf_model.hpp>

namespace omgs {

/// One gradient tensor of the model. Layers are given in forward order: index 0 is the
/// first layer of the forward pass; the backward pass produces gradients from L-1 to 0.
struct LayerSpec {
  std::string name;
  std::uint64_t numel = 0;  ///< number of gradient elements (> 0)
  double backward_s = 0.0;  ///< time to compute this layer's gradient (>= 0, finite)
};

/// Longest layer name accepted (bytes).
inline constexpr std::size_t max_layer_name_bytes = 1024;

/// Largest total number of gradient elements of a model (2^53, 36 PB of floats): every sum
/// of numel fits uint64 and converts to double exactly.
inline constexpr std::uint64_t max_total_numel = std::uint64_t{1} << 53;

/// Throws omgs::Error naming the first bad layer: empty list, empty / too long / duplicate
/// name, numel == 0, total numel above max_total_numel, negative or non-finite backward time.
OMGS_EXPORT void validate_layers(const std::vector<LayerSpec>& layers);

/// k = ceil(density * numel), the number of entries top-k keeps, clamped to [1, numel] for
/// numel > 0 (0 for numel == 0). A relative slack of 1e-12 absorbs the representation error
/// of decimal densities, so that 0.01 * 100 keeps 1 element, not 2.
OMGS_EXPORT std::uint64_t selected_count(std::uint64_t numel, double density);

/// Throws omgs::Error unless 0 < density <= 1.
OMGS_EXPORT void validate_density(double density);

// ---------------------------------------------------------------------------------------
// Plans and their timeline
// ---------------------------------------------------------------------------------------

/// How a group's gradient is exchanged: the id of a row of the planner's table of
/// collectives (src/plan/collective_table.hpp). The named ones are built in; ids above
/// them are collectives registered at start-up (detail::register_collective).
enum class Collective : std::uint8_t {
  sparse,  ///< error-feedback top-k, then one MPI_Iallgatherv of the (index, value) pairs
  dense,   ///< one MPI_Iallreduce of the whole gradient, averaged; no top-k, residual untouched
  /// error-feedback top-k, then the sparse allreduce (detail::SparseAllreduce, docs/comm.md):
  /// regions reduced point to point, a global top-k of the sums, survivors allgathered
  sparse_allreduce,
  /// the dense allreduce in two levels (docs/comm.md, "Two levels"): reduce-scatter inside the
  /// node, allreduce of the shard across nodes, allgather inside the node. Opt-in (only in
  /// PlanConfig::collectives), timed by the model's "allreduce_node" line
  allreduce_node,
  /// the sparse node-summed exchange (docs/comm.md, "The sparse node-summed form"): the node's
  /// gradients summed, the top-k of each rank's shard of the sum (density x the shard) with
  /// its error feedback, the shards' pairs allgathered across nodes, shared in the node. Its
  /// top-k runs in the exchange (on the host), not on the compute stream. Opt-in (only in
  /// PlanConfig::collectives), timed by the model's "sparse_node" line
  sparse_node,
};
/// The collective's name in its row ("sparse", "dense", "sparse_allreduce", "allreduce_node",
/// "sparse_node", or a registered
/// one's); "unknown" for an id no row has.
OMGS_EXPORT std::string_view to_string(Collective collective);
/// The collective of that name; throws omgs::Error naming the value and the known names.
OMGS_EXPORT Collective parse_collective(std::string_view name);

/// A set of collectives (any id, built in or registered).
class CollectiveSet {
 public:
  CollectiveSet() = default;
  CollectiveSet(std::initializer_list<Collective> collectives) {
    for (Collective c : collectives) insert(c);
  }
  bool contains(Collective c) const { return bits_.test(static_cast<std::size_t>(c)); }
  void insert(Collective c) { bits_.set(static_cast<std::size_t>(c)); }
  void erase(Collective c) { bits_.reset(static_cast<std::size_t>(c)); }
  bool empty() const { return bits_.none(); }
  std::size_t size() const { return bits_.count(); }
  bool operator==(const CollectiveSet& o) const { return bits_ == o.bits_; }
  bool operator!=(const CollectiveSet& o) const { return bits_ != o.bits_; }

 private:
  std::bitset<256> bits_;  // one bit per value of Collective (std::uint8_t)
};
/// Comma-separated names of the table's rows ("sparse,sparse_allreduce,dense"; spaces around
/// a name ignored), as RuntimeOptions::collectives is written in OMGS_COLLECTIVES, the C API
/// and the tools. "" is the empty set. Throws omgs::Error naming an unknown or empty name.
OMGS_EXPORT CollectiveSet parse_collective_set(std::string_view list);
/// The names of the set's collectives in id order, comma-separated ("" for the empty set).
OMGS_EXPORT std::string to_string(const CollectiveSet& set);

/// A merged group: the consecutive layers [begin, end) in forward indices. Backward
/// produces layer end-1 first, so the group is complete when layer `begin` is ready.
struct Group {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::uint64_t numel = 0;  ///< sum of the layers' numel
  Collective collective = Collective::sparse;
};

/// When each phase of a group happens in the predicted pipeline (seconds from the start of
/// the backward pass). Backward and top-k share the compute stream; communications are
/// serialized on the network in plan order.
struct GroupTiming {
  double backward_start_s = 0.0;
  double topk_start_s = 0.0;  ///< = end of the group's backward
  double topk_end_s = 0.0;
  double comm_start_s = 0.0;
  double comm_end_s = 0.0;
};

struct Timeline {
  std::vector<GroupTiming> groups;     ///< one per group, plan order
  double compute_end_s = 0.0;          ///< end of the last top-k
  double iteration_end_s = 0.0;        ///< end of the last communication
  double non_overlapped_comm_s = 0.0;  ///< iteration_end_s - compute_end_s
  double comm_total_s = 0.0;           ///< sum of the communication times
};

/// mgs, layerwise, single and threshold make all-sparse plans; optimal also chooses the
/// collective of each group when the model knows the allreduce (PerfModel::knows_allreduce);
/// mgs_mixed is MGS's grouping with the best collective per group; dense is the best
/// all-dense grouping; mixed chooses among mgs, mgs_mixed, optimal and dense.
/// The last three need a model that knows the allreduce (else mixed is mgs or optimal).
/// `automatic` plans with every planner of automatic_candidates() and keeps one; the plan's
/// `planner` is the one that won. mixed and automatic choose with choose_plan (near-ties
/// within PlanConfig::choice_margin go to fewer groups, docs/planner.md).
enum class Planner {
  mgs,
  layerwise,
  single,
  threshold,
  optimal,
  mgs_mixed,
  dense,
  mixed,
  automatic
};

/// "mgs" | "layerwise" | "single" | "threshold" | "optimal" | "mgs_mixed" | "dense" |
/// "mixed" | "automatic"; throws omgs::Error otherwise.
OMGS_EXPORT Planner parse_planner(std::string_view name);
OMGS_EXPORT std::string_view to_string(Planner planner);
/// The all-sparse planners and optimal, in a fixed order (for comparisons; every model).
OMGS_EXPORT const std::vector<Planner>& all_planners();
/// mgs_mixed, dense and mixed: the planners that need the allreduce cost.
OMGS_EXPORT const std::vector<Planner>& choice_planners();

/// The relative margin of choose_plan's near-ties: 0.10, i.e. plans predicted within 10% of
/// the best count as equally fast. It is the spread of the predicted iteration time of one
/// plan over repeated calibrations of the same machine (docs/planner.md, "Choosing among
/// plans"): differences below it are calibration noise, not a property of the plans.
inline constexpr double default_choice_margin = 0.10;
/// choose_plan's near-ties keep the plans whose predicted communication is within this factor
/// of the least: hidden communication still costs the host and a shared fabric, which the
/// model does not count (docs/planner.md, "Choosing among plans").
inline constexpr double near_tie_comm_factor = 2.0;

/// Which exchange the sparse groups of a plan use (docs/planner.md).
enum class SparseExchange : std::uint8_t {
  allgather,  ///< every sparse group is Collective::sparse (the pairs' allgather)
  allreduce,  ///< every sparse group is Collective::sparse_allreduce
  automatic,  ///< per group, whichever the model predicts faster
};
OMGS_EXPORT std::string_view to_string(SparseExchange exchange);
/// "allgather" | "allreduce" | "automatic"; throws omgs::Error naming the value otherwise.
OMGS_EXPORT SparseExchange parse_sparse_exchange(std::string_view name);

/// The defaults of a run with nothing set (RuntimeOptions, omgs_options_init, omgs-plan):
/// the planner that chooses per group between the sparse and the dense exchange, and the
/// pairs' allgather for the sparse groups, which measured faster than the sparse allreduce
/// at 2-16 emulated hosts (docs/planner.md, "Defaults").
inline constexpr Planner default_planner = Planner::mixed;
inline constexpr SparseExchange default_sparse_exchange = SparseExchange::allgather;

struct PlanConfig {
  int workers = 1;                               ///< P, number of ranks
  double density = 0.001;                        ///< fraction of entries top-k keeps
  std::uint64_t threshold_numel = 8192;          ///< the threshold planner's group size
  double choice_margin = default_choice_margin;  ///< choose_plan's margin, in [0, 1]
  SparseExchange sparse_exchange = SparseExchange::allgather;
  /// The collectives this run allows; empty (the default): the ones sparse_exchange names,
  /// and dense (allowed_collectives). Planners give a group only a collective that is allowed
  /// and that the model predicts for `workers`; the all-sparse planners only collectives with
  /// a top-k (docs/planner.md, "The table of collectives").
  CollectiveSet collectives{};
  /// Bytes per rank a group's exchange may allocate (0: no limit): the choosing planners
  /// (mgs_mixed, optimal, dense) give no group a collective that would need more.
  std::uint64_t memory_budget_bytes = 0;
  /// The largest element count one MPI call of a group's exchange may pass (0: no limit, as
  /// predictions of what the collectives cost assume; INT_MAX: MPI's int counts, which the
  /// runtime's wires refuse to pass): the choosing planners keep within it too.
  std::uint64_t max_mpi_count = 0;
  /// The most elements one group may hold (0: no limit, as predictions assume; 2^32 - 1: the
  /// runtime's 32-bit indices, which its set-up refuses past): no planner merges past it
  /// (MGS and the choosing planners keep every group within it where the layers allow).
  std::uint64_t max_group_numel = 0;
};

/// A byte count for PlanConfig::memory_budget_bytes: a number (a fraction allowed, the bytes
/// rounded down) with an optional unit: B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB,
/// GB, TB (powers of 1000), e.g. "512MiB", "2GiB", "1.5GB", "4096". "0" is no limit. Throws
/// omgs::Error naming the text otherwise (no number, an unknown unit, past 2^64-1 bytes).
OMGS_EXPORT std::uint64_t parse_byte_size(std::string_view text);

/// config.collectives if not empty, else what config.sparse_exchange says: allgather:
/// {sparse, dense}; allreduce: {sparse_allreduce, dense}; automatic: all three, but at two
/// ranks {sparse, dense} (there the sparse allreduce cannot beat the allgather).
OMGS_EXPORT CollectiveSet allowed_collectives(const PlanConfig& config);

/// How a plan relates to what its planner promises. Only the optimal planner, which is
/// bounded by an OptimalBudget, ever reports anything but `complete`.
enum class PlanStatus {
  complete,     ///< the planner ran as specified (for optimal: the proven optimum)
  approximate,  ///< optimal search with thinned Pareto fronts: within gap_bound_s of optimum
  fallback,     ///< optimal search over budget: the MGS grouping is returned instead
};
OMGS_EXPORT std::string_view to_string(PlanStatus status);

struct Plan {
  Planner planner = Planner::mgs;
  std::vector<Group> groups;                ///< plan order: groups[0] holds layer L-1
  std::vector<std::size_t> group_of_layer;  ///< layer index -> group index
  Timeline predicted;                       ///< the timeline model applied to `groups`
  PlanStatus status = PlanStatus::complete;
  /// approximate: predicted.iteration_end_s - optimum <= gap_bound_s (proven bound);
  /// 0 when complete; not known (reported as -1) after a fallback.
  double gap_bound_s = 0.0;
  std::string status_note;  ///< why the plan is approximate or a fallback; empty if complete
  /// For Planner::mixed: the candidate whose plan it took (else the same as `planner`).
  Planner picked = Planner::mgs;
  /// Number of dense groups: those whose collective sends the whole gradient, no top-k
  /// (Collective::dense, or a registered collective without a top-k).
  OMGS_EXPORT std::size_t dense_groups() const;
};

/// Limits of the optimal planner. All are counts, not clocks, so every rank that plans
/// the same inputs gets the same plan. With pairs = L(L+1)/2, each boundary's Pareto front
/// is capped at F = min(max_front, (max_work - pairs) / pairs, max_states / (3 (L+1)))
/// states: time is O(max_work) (pairs model evaluations plus at most pairs * F state
/// updates, 10-50 ns each on a 2-core VM: about a second) and memory O(max_states).
/// A front that grows larger than F is thinned, and the error this can cause is bounded
/// and reported (PlanStatus::approximate); if F would be below 2 the search is skipped
/// and MGS is used (PlanStatus::fallback): by default for more than 4,471 layers.
struct OptimalBudget {
  std::size_t max_front = SIZE_MAX;               ///< upper limit of F (for tests and experiments)
  std::uint64_t max_work = 30'000'000;            ///< model evaluations plus state updates
  std::size_t max_states = std::size_t{1} << 21;  ///< 40 bytes each: 80 MiB
};

/// The timeline model of the MGS paper applied to any grouping (plan order, covering every
/// layer once): group g's backward starts when the previous group's top-k ends, its top-k
/// follows its backward, and its communication starts when both its top-k and the previous
/// communication are done. Throws omgs::Error if `groups` is not such a partition.
OMGS_EXPORT Timeline predict(const std::vector<LayerSpec>& layers, const std::vector<Group>& groups,
                             const PerfModel& model, const PlanConfig& config);

/// Builds the Plan (group_of_layer, predicted timeline) of a grouping.
OMGS_EXPORT Plan make_plan_from_groups(Planner planner, const std::vector<LayerSpec>& layers,
                                       std::vector<Group> groups, const PerfModel& model,
                                       const PlanConfig& config);

/// Validates the inputs, runs the planner and predicts its timeline. The optimal planner
/// runs under `budget` (see Plan::status).
OMGS_EXPORT Plan make_plan(Planner planner, const std::vector<LayerSpec>& layers,
                           const PerfModel& model, const PlanConfig& config,
                           const OptimalBudget& budget = {});

/// The candidates of Planner::mixed for this model and P: mgs, mgs_mixed, optimal, dense
/// (mgs and optimal if the model does not know the allreduce). With
/// SparseExchange::automatic and a model that knows the sparse allreduce, mixed and
/// automatic also plan mgs with every group on it (SparseExchange::allreduce).
OMGS_EXPORT const std::vector<Planner>& mixed_candidates(const PerfModel& model, int workers);
/// The candidates of Planner::automatic, in their order of preference: mgs, mgs_mixed,
/// optimal, dense, threshold, single, layerwise (mgs_mixed and dense only when the model
/// knows the allreduce for P).
OMGS_EXPORT const std::vector<Planner>& automatic_candidates(const PerfModel& model, int workers);
/// The one rule that chooses among plans (Planner::mixed, Planner::automatic, the workers
/// sweep): with `best` the smallest predicted iteration end, the candidates predicted within
/// best * (1 + margin) (and at or below every baseline) are eligible; of those, the ones
/// communicating (Timeline::comm_total_s) at most near_tie_comm_factor times the least
/// stay; among them the fewest groups win, then the simpler collective mix (one kind, else
/// fewer groups of the minority kind), then the earlier candidate (the callers' fixed
/// order). Deterministic: every rank that plans the same inputs picks the same index.
/// Throws omgs::Error if `candidates` is empty or margin is outside [0, 1].
OMGS_EXPORT std::size_t choose_plan(const std::vector<Plan>& candidates,
                                    double margin = default_choice_margin);
/// Throws omgs::Error unless 0 <= margin <= 1.
OMGS_EXPORT void validate_choice_margin(double margin);
/// The candidate choose_plan picks, as a Planner::mixed plan whose `picked` names the
/// candidate's planner. Throws if empty.
OMGS_EXPORT Plan best_of(std::vector<Plan> candidates, double margin = default_choice_margin);

/// The groupings themselves (plan order). make_plan calls these after validation.
OMGS_EXPORT std::vector<Group> groups_mgs(const std::vector<LayerSpec>& layers,
                                          const PerfModel& model, const PlanConfig& config);
OMGS_EXPORT std::vector<Group> groups_layerwise(const std::vector<LayerSpec>& layers);
OMGS_EXPORT std::vector<Group> groups_single(const std::vector<LayerSpec>& layers);
OMGS_EXPORT std::vector<Group> groups_threshold(const std::vector<LayerSpec>& layers,
                                                std::uint64_t threshold_numel);
/// Minimum predicted iteration end over all partitions into consecutive groups (dynamic
/// programming over group boundaries with the Pareto front of (compute end, comm end)),
/// bounded by `budget`: see OptimalResult and docs/reliability.md.
struct OptimalResult {
  std::vector<Group> groups;  ///< plan order
  PlanStatus status = PlanStatus::complete;
  double gap_bound_s = 0.0;  ///< as Plan::gap_bound_s
  std::string note;          ///< as Plan::status_note
};
OMGS_EXPORT OptimalResult search_optimal(const std::vector<LayerSpec>& layers,
                                         const PerfModel& model, const PlanConfig& config,
                                         const OptimalBudget& budget = {});
/// search_optimal(...).groups.
OMGS_EXPORT std::vector<Group> groups_optimal(const std::vector<LayerSpec>& layers,
                                              const PerfModel& model, const PlanConfig& config);
/// The same optimum by trying all 2^(L-1) partitions; L <= 20 (an oracle for tests). When
/// the model knows the allreduce it also tries both collectives for every group; L <= 12.
OMGS_EXPORT std::vector<Group> groups_optimal_exhaustive(const std::vector<LayerSpec>& layers,
                                                         const PerfModel& model,
                                                         const PlanConfig& config);

/// The collective of each group of a fixed grouping (plan order) that minimizes the
/// predicted iteration end: dynamic programming over the groups with the Pareto front of
/// (compute end, comm end), exact unless a front exceeds max(64, 2^22 / groups) states
/// (then thinned evenly, deterministic). Returns the groups with `collective` set; all sparse if
/// the model does not know the allreduce. MGS's extension (Planner::mgs_mixed) applies this to
/// MGS's groups.
OMGS_EXPORT std::vector<Group> choose_collectives(const std::vector<LayerSpec>& layers,
                                                  std::vector<Group> groups, const PerfModel& model,
                                                  const PlanConfig& config);
/// The best all-dense grouping (the optimal search with only dense groups); throws if the
/// model does not know the allreduce.
OMGS_EXPORT std::vector<Group> groups_dense(const std::vector<LayerSpec>& layers,
                                            const PerfModel& model, const PlanConfig& config);

// ---------------------------------------------------------------------------------------
// Model description files
// ---------------------------------------------------------------------------------------

/// Reads the CSV model format: header `name,numel,backward_s`, then one row per tensor in
/// forward order. Blank lines and lines starting with '#' are skipped. Errors name the
/// source, line and field. The result is validated (validate_layers).
OMGS_EXPORT std::vector<LayerSpec> parse_model_csv(std::istream& in, const std::string& source);
OMGS_EXPORT std::vector<LayerSpec> load_model_csv(const std::string& path);
/// Writes layers in the CSV model format (times with 17 significant digits, so they read
/// back bit for bit), e.g. the backward times a Runtime measured (rt.layers()), to plan
/// the next run with the same inputs. Throws omgs::Error on a name the format cannot hold
/// (a comma, a line break, leading '#') or if the file cannot be written.
OMGS_EXPORT void save_model_csv(const std::string& path, const std::vector<LayerSpec>& layers);

/// A timeline with its caption, one block of lanes in timeline_svg.
struct LabeledTimeline {
  std::string label;
  Timeline timeline;
};

/// A self-contained SVG Gantt chart of one or more timelines (e.g. predicted above
/// measured) on a shared time axis. Each timeline gets three lanes: compute (the groups'
/// backward), top-k and communication; group numbers are written in blocks wide enough.
OMGS_EXPORT std::string timeline_svg(const std::vector<LabeledTimeline>& rows,
                                     const std::string& title);

/// Bytes per rank each group's exchange allocates (its collective's row, CollectiveRow::
/// memory_bytes, for the group's numel at `workers` ranks and `density`), in plan order: what
/// PlanConfig::memory_budget_bytes bounds (omgs-plan --footprint). The runtime holds every
/// group's buffers at once, so the plan's footprint per rank is their sum.
OMGS_EXPORT std::vector<double> group_memory_bytes(const Plan& plan, int workers, double density);

/// A running plan's memory (RuntimeStats::footprint): bytes per rank each group's exchange
/// holds, in plan order, and their sum; the runtime's memory check's figures. A pair group's
/// is group_memory_bytes' with 8-byte pairs; a dense group's gradient floats live in the
/// runtime's flat per-element buffers, which the row counts and this does not. Empty and 0
/// before a plan is installed.
struct PlanFootprint {
  std::vector<std::uint64_t> group_bytes;
  std::uint64_t plan_bytes = 0;
};

/// The plan as JSON: {"planner", "workers", "density", "groups": [[names, highest index
/// first], ...], "group_numel": [...], "predicted": {...}, "timeline": [...]}.
OMGS_EXPORT std::string plan_to_json(const Plan& plan, const std::vector<LayerSpec>& layers,
                                     const PlanConfig& config);

}  // namespace omgs
