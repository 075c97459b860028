// Worker sweeps: the predicted plans of one model for many numbers of ranks
// (omgs-plan --workers-sweep), and their chart. Part of the plan module (no MPI, no Kokkos).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <omgs/node_model.hpp>
#include <omgs/plan.hpp>

namespace omgs {

/// Predicted plans of one model for many numbers of workers (omgs-plan --workers-sweep).
struct SweepRow {
  int workers = 0;
  int ranks_per_node = 1;  ///< the sweep's node shape (1: flat, no two-level rows)
  /// Planner::dense: the best all-dense grouping with an fp32 allreduce (4 bytes per element,
  /// whatever the model's allreduce_element_bytes); with a node shape each group takes the
  /// faster of the flat and the two-level allreduce (Collective::allreduce_node)
  Plan dense;
  Plan mgs;      ///< all-sparse MGS, every group allgathered (the published algorithm)
  Plan optimal;  ///< boundaries and collectives searched together
  /// best_of(mgs, mgs_mixed, optimal, dense) planned with the sweep's SparseExchange and the
  /// model's bytes per dense element (omgs' own dense groups in the form in force: with a
  /// 16-bit form, omgs-plan --dense-wire bf16, its dense candidate is dense_bf16), plus
  /// the all-allgather `mgs` and the all-sparse-allreduce `sparse_allreduce` when that
  /// exchange is not allgather, under the sweep's margin
  Plan mixed;
  /// MGS with every group exchanged by the sparse allreduce (SparseExchange::allreduce),
  /// when the model knows it for P (has_sparse_allreduce): the Ok-Topk-style baseline.
  Plan sparse_allreduce;
  bool has_sparse_allreduce = false;
  /// Planner::dense with a bf16 allreduce (2 bytes per element; what a bf16 training code
  /// sends), when the model is an AlphaBetaModel (has_bf16); a baseline beside `dense`, and
  /// mixed's dense candidate when the model's dense elements are 2 bytes.
  Plan dense_bf16;
  bool has_bf16 = false;
  /// With a node shape (ranks_per_node > 1, has_sparse_node): the best grouping with every
  /// group exchanged by the sparse node-summed form (Collective::sparse_node; the dense
  /// planner's search on that row alone, as its top-k is in the exchange): a baseline beside
  /// mixed, whose mgs_mixed and optimal candidates may give that row to any group
  Plan sparse_node;
  bool has_sparse_node = false;
  double backward_s = 0.0;  ///< the backward pass alone: the floor every plan is above
};
/// One row per P (in the given order). The model must know both collectives for every P
/// (else omgs::Error naming P). Each P costs a few optimal searches (about a second each
/// for hundreds of layers, bounded by `budget`). `mixed` is chosen by choose_plan with
/// `margin` (0: the strict minimum, never slower than dense, mgs, sparse_allreduce or
/// optimal; any margin: never slower than dense or sparse_allreduce). `exchange` is the
/// PlanConfig::sparse_exchange of mixed's candidates (allreduce needs a model that knows
/// the sparse allreduce for every P). `memory_budget_bytes`, `max_mpi_count` and
/// `max_group_numel` are every plan's PlanConfig limits (0: none, the default). `node`
/// (ranks_per_node > 1; the default is flat) makes every model a NodeModel of the given alpha-beta
/// model: omgs' plans may use the two-level rows, the dense baselines become two-level where
/// faster, and the all-node-summed plan is added beside them; it throws omgs::Error for
/// ranks_per_node < 1, one that does not divide some P, or a model that is not alpha-beta. With
/// ranks_per_node = 1 the rows are the flat sweep's exactly.
OMGS_EXPORT std::vector<SweepRow> sweep_workers(
    const std::vector<LayerSpec>& layers, const PerfModel& model, double density,
    const std::vector<int>& workers, const OptimalBudget& budget = {},
    double margin = default_choice_margin, SparseExchange exchange = default_sparse_exchange,
    std::uint64_t memory_budget_bytes = 0, std::uint64_t max_mpi_count = 0,
    const NodeShape& node = {}, std::uint64_t max_group_numel = 0);
/// "2,4,8" or with an ellipsis "2,4,...,4096" (continues the ratio, or else the step, of
/// the two numbers before it up to the one after it). Throws omgs::Error on a bad list.
OMGS_EXPORT std::vector<int> parse_workers_list(std::string_view text);
/// A log-log SVG chart of predicted iteration time against P, one line per series (dense
/// fp32 and bf16, mgs, the sparse allreduce, optimal, mixed) and the backward pass (what
/// communication hides behind): where the lines cross is where the collective should change.
OMGS_EXPORT std::string sweep_svg(const std::vector<SweepRow>& rows, const std::string& title);

}  // namespace omgs
