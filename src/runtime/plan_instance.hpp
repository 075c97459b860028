// Internal: the plan instance, everything that depends on the plan in force (its group
// exchanges, the selector they share, the engine that posts them, the per-group times of
// the iteration), built whole and swapped in by RuntimeImpl::install_plan()
// (plan_instance.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include <omgs/comm.hpp>
#include <omgs/plan.hpp>

#include "runtime/group_exchange.hpp"

namespace omgs::detail {

constexpr double nan_s = std::numeric_limits<double>::quiet_NaN();

/// How install_plan() takes a plan: a new instance built and swapped in, or (the groups of
/// the plan in force, at the density in force) a new prediction of the plan in force.
enum class PlanChange { rebuild, repredict };

/// Group g's times of one iteration, now_s() seconds (NaN where it did not happen): its
/// selection, its aggregation, and its exchange as the engine saw it.
struct GroupIteration {
  double topk_start_s = nan_s, topk_end_s = nan_s;
  double agg_start_s = nan_s, agg_end_s = nan_s;
  GroupTimes comm;
  const char* collective = "";  // its exchange's name (GroupExchange::name)
};

/// Construction, the profiler's replan, the closed loop's switch and a change of density
/// all take install_plan(), the one path that builds one. Not movable: the exchanges refer
/// to ctx.
struct PlanInstance {
  PlanInstance() = default;
  PlanInstance(const PlanInstance&) = delete;
  PlanInstance& operator=(const PlanInstance&) = delete;

  Plan plan;
  std::uint32_t generation = 0;  // 0 for the first plan, + 1 for each that replaced one
  ExchangeContext ctx;           // what the exchanges share: selector, scratch, residual flags
  std::vector<std::unique_ptr<GroupExchange>> exchanges;  // one per group, plan order
  std::unique_ptr<ProgressEngine> engine;                 // posts what the exchanges describe
  // Per group, per iteration (runtime.cpp); timestamps are now_s() seconds.
  std::vector<std::size_t> remaining;  // layers of the group not yet ready
  std::vector<char> group_done;        // finish() has dealt with group g in this iteration
  std::vector<double> topk_start_s, topk_end_s, agg_start_s, agg_end_s;

  /// Every group waits for all of its layers again.
  void reset_remaining();
  /// Moves every group's residual that lives in resid_alt back to resid, before another
  /// plan groups the layers differently. Allocates nothing.
  void gather_residual();
};

}  // namespace omgs::detail
