// Internal: the performance model fitted to measured timelines (the runtime's closed loop,
// docs/planner.md "Closed loop"). Pure C++17 like the rest of plan
// (tests/plan/test_timeline_fit.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/plan.hpp>

#include "plan/collective_costs.hpp"
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
  LinearFit topk;  ///< seconds ~ c0 + c1 * numel (c0: the per-group constant)
  /// One line per collective the plan's groups use, on the bytes it is fitted on
  /// (fit_line): the allgather's "allgather" (alpha + beta * bytes received), the sparse
  /// allreduce's "sparse_allreduce" (alpha + beta * its wire bytes), the dense groups'
  /// "allreduce" (alpha + beta * their gradient bytes); and the prior's other lines
  /// unchanged (FittedLine::groups 0).
  std::map<std::string, FittedLine, std::less<>> lines;
  std::size_t sizes = 0;           ///< distinct group sizes seen
  bool intercepts_fitted = false;  ///< false: one size only, c0 and alpha came from `prior`
  /// lines' fit of `name`, the zero line if none.
  LinearFit line(std::string_view name) const;
  /// lines' groups of `name`, 0 if none.
  std::size_t groups(std::string_view name) const;
};

/// The line a group's exchange is fitted on (its row's CollectiveRow::line) and its x: for a
/// row with a top-k and fit_bytes, those (for the allgather the bytes received in 8-byte
/// pairs, the refit converting its beta to the pair format in force; for the sparse
/// allreduce its wire bytes at format.pair_bytes per pair, the wire in force when the points
/// were measured); for any other row its line's registered table bytes in `format` (the
/// dense allreduce's element_bytes * n: the form in force). nullptr (x unset) for a group
/// whose line has no registered bytes.
const char* fit_line(const Group& g, int workers, double density, const LineFormat& format,
                     double& x);

/// Each group's typical costs over `count` measured timelines of the plan (each with
/// groups.size() entries): the median over the iterations (what the run typically pays:
/// the model must predict the run, not its best case). count >= 1.
struct GroupPoints {
  std::vector<double> sparsify_s, allgather_s;  ///< per group
};
GroupPoints group_medians(std::size_t groups, const Timeline* timelines, std::size_t count);

/// Fits top-k c0 + c1 numel to the sparse groups' points and one line per collective of the
/// plan's groups (fit_line: the sparse exchanges' and the dense allreduce's alike, each on
/// its own bytes in `format`, the formats in force when the points were measured) to their
/// exchanges' times, in relative error above the mean cost and absolute error below it (a
/// near-zero point must not decide the line), non-negative (fit_nonnegative). With a single
/// group size (of the sparse groups, for the top-k; of the groups of one line, for its line)
/// the intercepts cannot be told from the slopes: they are taken from `prior` (its top-k's
/// and that line's c0, capped at the measured cost; 0 for a line the prior lacks) and only
/// the slopes are fitted. Lines of the prior without groups in the plan stay as they are;
/// without a sparse group the top-k stays the prior's.
TimelineFit fit_points(const std::vector<Group>& groups, const GroupPoints& points, int workers,
                       double density, const FittedModel& prior,
                       const LineFormat& format = LineFormat{});

/// group_medians, then fit_points: fits the lines to `count` measured timelines of the plan
/// `groups` (each timeline has groups.size() entries). Each group is represented by the
/// median of its costs over the iterations (what the run typically pays: the model must
/// predict the run, not its best case). count >= 1.
TimelineFit fit_timelines(const std::vector<Group>& groups, const Timeline* timelines,
                          std::size_t count, int workers, double density, const FittedModel& prior);

}  // namespace omgs::detail
