// Internal: the performance model fitted to measured timelines (the runtime's closed loop,
// docs/planner.md "Closed loop"). Pure C++17 like the rest of plan
// (tests/plan/test_timeline_fit.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include <omgs/plan.hpp>

#include "plan/fit.hpp"

namespace omgs::detail {

/// The timeline model's terms of one group as a measured iteration paid them.
struct GroupCosts {
  double backward_s = 0.0;   ///< topk_start - backward_start
  double sparsify_s = 0.0;   ///< topk_end - topk_start (feedback, selection, packing, fence)
  double allgather_s = 0.0;  ///< comm_end - max(comm_start, the previous group's comm_end)
};

/// Group g's costs in timeline t (plan order; the network serves one allgather at a time,
/// so an allgather posted while the previous one ran is charged from that one's end).
GroupCosts group_costs(const Timeline& t, std::size_t g);

struct TimelineFit {
  LinearFit topk;       ///< seconds ~ c0 + c1 * numel (c0: the per-group constant)
  LinearFit allgather;  ///< seconds ~ alpha + beta * bytes received
  /// The sparse allreduce groups' exchange: seconds ~ alpha + beta * wire bytes
  /// (AlphaBetaModel::sparse_allreduce_bytes); the prior when the plan has none.
  LinearFit sparse_allreduce;
  std::size_t sparse_allreduce_groups = 0;  ///< the plan's groups that fitted it
  std::size_t sizes = 0;                    ///< distinct group sizes seen
  bool intercepts_fitted = false;  ///< false: one size only, c0 and alpha came from `prior`
};

/// Each group's typical costs over `count` measured timelines of the plan (each with
/// groups.size() entries): the median over the iterations (what the run typically pays:
/// the model must predict the run, not its best case). count >= 1.
struct GroupPoints {
  std::vector<double> sparsify_s, allgather_s;  ///< per group
};
GroupPoints group_medians(std::size_t groups, const Timeline* timelines, std::size_t count);

/// Fits top-k c0 + c1 numel and allgather alpha + beta bytes to per-group points, in
/// relative error above the mean cost and absolute error below it (a near-zero point must
/// not decide the line), non-negative (fit_nonnegative). With a single group size the
/// intercepts cannot be told from the slopes: they are taken from `prior_topk.c0` /
/// `prior_allgather.c0` (capped at the measured cost) and only the slopes are fitted.
/// Groups of Collective::sparse_allreduce pay the same top-k and are fitted like the sparse
/// ones, their communication on its own line (TimelineFit::sparse_allreduce, intercept from
/// `prior_sparse_allreduce` when they have one size only), its bytes counted with
/// `sar_pair_bytes` per pair (the pair wire in force when the points were measured).
TimelineFit fit_points(const std::vector<Group>& groups, const GroupPoints& points, int workers,
                       double density, const LinearFit& prior_topk,
                       const LinearFit& prior_allgather,
                       const LinearFit& prior_sparse_allreduce = {}, double sar_pair_bytes = 8.0);

/// group_medians, then fit_points: fits top-k and allgather costs to `count` measured timelines of
/// the plan `groups` (each timeline has groups.size() entries). Each group is represented by the
/// median of its costs over the iterations (what the run typically pays: the model must predict the
/// run, not its best case) and the lines are fitted as fit_points fits them. With a single group
/// size the intercepts cannot be told from the slopes: they are taken from `prior_topk.c0` /
/// `prior_allgather.c0` (capped at the measured cost) and only the slopes are fitted. count >= 1.
TimelineFit fit_timelines(const std::vector<Group>& groups, const Timeline* timelines,
                          std::size_t count, int workers, double density,
                          const LinearFit& prior_topk, const LinearFit& prior_allgather);

}  // namespace omgs::detail
