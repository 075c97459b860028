// Internal: the closed loop's candidate at a refit (docs/planner.md, "The loop's candidate
// set"): the configured planner's plan and the automatic candidates' plans under the fitted
// model, the one predicted fastest taken, the configured planner's kept on near-ties. Pure
// C++17 like the rest of plan (tests/plan/test_loop_candidate.cpp); every rank plans the
// same agreed inputs, so every rank gets the same candidate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs::detail {

/// The optimal search's budget inside a refit: a thirtieth of the default's work (1e6, some
/// 30-50 ms on a 2-core VM), since a refit runs up to max_replans + 1 times on the
/// training's critical path; the default's memory cap. A search over it reports `approximate` (with
/// its bound) or `fallback` like any other, and is still a candidate.
OptimalBudget loop_optimal_budget();

/// `model` as an all-sparse planner's loop sees it: every cost but the dense allreduce,
/// which it does not know, so that the optimal search and the automatic candidates plan
/// sparse groups only (the predictions of all-sparse plans are `model`'s, bit for bit).
class SparseOnlyModel final : public PerfModel {
 public:
  explicit SparseOnlyModel(const PerfModel& model) : m_(model) {}
  double topk_s(std::uint64_t numel) const override { return m_.topk_s(numel); }
  double allgather_s(std::uint64_t numel, int workers, double density) const override {
    return m_.allgather_s(numel, workers, density);
  }
  void check_workers(int workers) const override { m_.check_workers(workers); }
  std::string describe() const override { return m_.describe() + " (sparse groups only)"; }
  bool knows_sparse_allreduce(int workers) const override {
    return m_.knows_sparse_allreduce(workers);
  }
  double sparse_allreduce_s(std::uint64_t numel, int workers, double density) const override {
    return m_.sparse_allreduce_s(numel, workers, density);
  }
  /// The lines of the table's rows with a top-k (registered ones too); none without.
  bool knows_collective(std::string_view name, int workers) const override;
  double collective_s(std::string_view name, std::uint64_t numel, int workers,
                      double density) const override;

 private:
  const PerfModel& m_;
};

/// True for the planners whose plans are all sparse (mgs, layerwise, single, threshold):
/// their loop compares all-sparse plans only (under SparseOnlyModel). The loop changes their
/// grouping, not the exchange the user chose, and the refit does not fit the dense
/// allreduce, so a dense group's prediction would be the calibration's alone.
bool sparse_only_planner(Planner planner);

/// The planners whose plans a refit compares, `configured` first, then every planner of
/// automatic_candidates(model, workers) other than it (threshold only with
/// threshold_numel > 0, as Planner::automatic does), the fixed groupings (single,
/// layerwise, threshold) before the searches. `automatic` alone: its plan is already the
/// choice among those candidates. Pass SparseOnlyModel for a sparse_only_planner.
std::vector<Planner> loop_planners(Planner configured, const PerfModel& model,
                                   const PlanConfig& config);

/// Whether an alternative may be the loop's candidate or exploration against the configured
/// planner's plan: its prediction is finite, and it is predicted faster than the configured
/// plan by more than default_choice_margin or communicates (Timeline::comm_total_s) at most
/// near_tie_comm_factor times as much (choose_plan's near-tie rule, applied at a refit).
bool loop_admits(const Plan& alternative, const Plan& configured);

/// plans[0] is the configured planner's plan, the others the alternatives (any order,
/// fixed on every rank). Returns the index of the admitted (loop_admits) alternative
/// predicted fastest when it is
/// predicted at least `min_gain` (RuntimeOptions::replan_min_gain) of plans[0]'s prediction
/// faster than plans[0]; else 0 (near-ties keep the configured planner's plan). Among
/// alternatives predicted equally fast, the earlier. Throws omgs::Error if `plans` is
/// empty or min_gain is negative or not finite.
std::size_t loop_candidate(const std::vector<Plan>& plans, double min_gain);

/// True if the two groupings are the same groups with the same collectives.
bool same_groups(const std::vector<Group>& a, const std::vector<Group>& b);

/// True if `a` is predicted to communicate (Timeline::comm_total_s, hidden or not) at most
/// 1 / near_tie_comm_factor of what `b` communicates, and `b` communicates at all.
bool communicates_far_less(const Plan& a, const Plan& b);

/// The tie margin decide() widens to for a proposal (LoopInputs::explore_margin):
/// default_choice_margin when the proposal communicates_far_less than the plan in force
/// (choose_plan calls plans within that margin ties), else 0 (min_gain alone).
double loop_explore_margin(const Plan& proposal, const Plan& in_force);

/// The plan a refit puts to the loop's decision (loop_decision.hpp), given the plan in force
/// (its groups, and its prediction under the same model): loop_candidate's when it differs
/// from the plan in force and is predicted at least min_gain of its time faster (decide()
/// switches to it). Otherwise the one exploration's plan, among plans[0] and the admitted
/// ones whose groups differ from the plan in force: the one that communicates least of those
/// predicted within max(min_gain, default_choice_margin) of the plan in force that
/// communicate_far_less than it; else the one predicted fastest. decide() explores it once
/// if it is within its tie margin (loop_explore_margin) and otherwise keeps it out. Returns
/// loop_candidate's index when no plan differs.
std::size_t loop_proposal(const std::vector<Plan>& plans, double min_gain, const Plan& in_force);

}  // namespace omgs::detail
