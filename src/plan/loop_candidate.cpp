// The closed loop's candidate at a refit (loop_candidate.hpp).
#include "plan/loop_candidate.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <omgs/error.hpp>

#include "plan/collective_table.hpp"

namespace omgs::detail {

OptimalBudget loop_optimal_budget() {
  OptimalBudget b;
  b.max_work /= 30;
  return b;
}

namespace {
// The row timed by the model's line `name`: nullptr for a line no row uses.
const CollectiveRow* row_of_line(std::string_view name) {
  for (const CollectiveRow& r : collective_rows())
    if (r.line == name) return &r;
  return nullptr;
}
bool built_in_line(std::string_view name) {
  return name == "allgather" || name == "allreduce" || name == "sparse_allreduce";
}
}  // namespace

bool SparseOnlyModel::knows_collective(std::string_view name, int workers) const {
  const CollectiveRow* row = row_of_line(name);
  if (row != nullptr && !row->sparsifies) return false;
  // The built-in lines through this model's virtuals (which hide the dense allreduce).
  return built_in_line(name) ? PerfModel::knows_collective(name, workers)
                             : m_.knows_collective(name, workers);
}

double SparseOnlyModel::collective_s(std::string_view name, std::uint64_t numel, int workers,
                                     double density) const {
  if (built_in_line(name)) return PerfModel::collective_s(name, numel, workers, density);
  const CollectiveRow* row = row_of_line(name);
  if (row != nullptr && !row->sparsifies)
    throw Error("omgs: the performance model " + describe() + " has no " + std::string(name) +
                " cost (its plans have sparse groups only)");
  return m_.collective_s(name, numel, workers, density);
}

bool sparse_only_planner(Planner planner) {
  return planner == Planner::mgs || planner == Planner::layerwise || planner == Planner::single ||
         planner == Planner::threshold;
}

std::vector<Planner> loop_planners(Planner configured, const PerfModel& model,
                                   const PlanConfig& config) {
  std::vector<Planner> out = {configured};
  if (configured == Planner::automatic) return out;
  // The fixed groupings before the searches: an exact tie (optimal finding the one group)
  // is reported under the plainer name.
  auto fixed = [](Planner p) {
    return p == Planner::single || p == Planner::layerwise || p == Planner::threshold;
  };
  for (bool want_fixed : {true, false})
    for (Planner p : automatic_candidates(model, config.workers))
      if (fixed(p) == want_fixed && p != configured &&
          (p != Planner::threshold || config.threshold_numel != 0))
        out.push_back(p);
  return out;
}

bool loop_admits(const Plan& alternative, const Plan& configured) {
  const double t = alternative.predicted.iteration_end_s, t0 = configured.predicted.iteration_end_s;
  if (!std::isfinite(t)) return false;
  // choose_plan's near-tie rule: within its margin a plan that communicates far more is not
  // one the model can call faster (hidden communication still costs the host).
  return t < t0 * (1.0 - default_choice_margin) ||
         alternative.predicted.comm_total_s <=
             near_tie_comm_factor * configured.predicted.comm_total_s;
}

std::size_t loop_candidate(const std::vector<Plan>& plans, double min_gain) {
  if (plans.empty()) throw Error("omgs: the closed loop's candidate needs at least one plan");
  if (!(min_gain >= 0.0 && std::isfinite(min_gain)))
    throw Error("omgs: the closed loop's candidate: min_gain = " + std::to_string(min_gain) +
                " (must be finite and >= 0)");
  std::size_t best = 0;
  for (std::size_t i = 1; i < plans.size(); ++i) {
    const double t = plans[i].predicted.iteration_end_s;
    if (loop_admits(plans[i], plans[0]) && (best == 0 || t < plans[best].predicted.iteration_end_s))
      best = i;
  }
  const double configured = plans[0].predicted.iteration_end_s;
  // The same test decide() applies to a switch: an alternative the configured planner's plan
  // does not beat by that margin is within what the fitted model can tell apart.
  if (best != 0 && configured - plans[best].predicted.iteration_end_s >= min_gain * configured)
    return best;
  return 0;
}

bool same_groups(const std::vector<Group>& a, const std::vector<Group>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t g = 0; g < a.size(); ++g)
    if (a[g].begin != b[g].begin || a[g].end != b[g].end || a[g].collective != b[g].collective)
      return false;
  return true;
}

bool communicates_far_less(const Plan& a, const Plan& b) {
  return b.predicted.comm_total_s > 0 &&
         a.predicted.comm_total_s * near_tie_comm_factor <= b.predicted.comm_total_s;
}

double loop_explore_margin(const Plan& proposal, const Plan& in_force) {
  return communicates_far_less(proposal, in_force) ? default_choice_margin : 0.0;
}

std::size_t loop_proposal(const std::vector<Plan>& plans, double min_gain, const Plan& in_force) {
  const std::size_t c = loop_candidate(plans, min_gain);
  const double in_force_s = in_force.predicted.iteration_end_s;
  if (!same_groups(plans[c].groups, in_force.groups) &&
      in_force_s - plans[c].predicted.iteration_end_s >= min_gain * in_force_s)
    return c;  // decide() switches to it
  // No predicted gain over the plan in force: the one exploration. First the plan that
  // communicates least of those within the choice margin that communicate at most
  // 1 / near_tie_comm_factor of the plan in force (the model may call communication hidden
  // that costs the host, which only a measurement shows); else the plan predicted fastest of
  // those that differ from it.
  const double quiet_limit_s = in_force_s * (1.0 + std::max(min_gain, default_choice_margin));
  const std::size_t none = plans.size();
  std::size_t quiet = none, other = none;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const Timeline& p = plans[i].predicted;
    if (!(i == 0 || loop_admits(plans[i], plans[0])) || !std::isfinite(p.iteration_end_s) ||
        same_groups(plans[i].groups, in_force.groups))
      continue;
    if (p.iteration_end_s < quiet_limit_s && communicates_far_less(plans[i], in_force) &&
        (quiet == none || p.comm_total_s < plans[quiet].predicted.comm_total_s))
      quiet = i;
    if (other == none || p.iteration_end_s < plans[other].predicted.iteration_end_s) other = i;
  }
  if (quiet != none) return quiet;
  return other == none ? c : other;
}

}  // namespace omgs::detail
