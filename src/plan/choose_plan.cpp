// The one rule that chooses among plans (choose_plan, best_of; docs/planner.md, "Choosing
// among plans").
#include <algorithm>
#include <limits>
#include <string>

#include <omgs/plan.hpp>

#include "plan/collective_table.hpp"

namespace omgs {

void validate_choice_margin(double margin) {
  if (!(margin >= 0.0 && margin <= 1.0))  // also rejects NaN
    throw Error("omgs: choice_margin = " + std::to_string(margin) +
                " (must be in [0, 1]: a relative margin of the predicted iteration time)");
}

namespace {
// The simpler collective mix: one kind only (0), else the number of groups not of the
// most common kind.
std::size_t mix_complexity(const Plan& plan) {
  std::size_t count[256] = {};
  std::size_t most = 0;
  for (const Group& g : plan.groups)
    most = std::max(most, ++count[static_cast<std::size_t>(g.collective)]);
  return plan.groups.size() - most;
}

// A plan whose groups all use one collective whose row is a baseline (the dense allreduce,
// the sparse allreduce): what a user gets without omgs' choice.
bool is_baseline(const Plan& plan) {
  if (plan.groups.empty()) return false;
  const Collective c = plan.groups.front().collective;
  if (!detail::collective_row(c).baseline) return false;
  return std::all_of(plan.groups.begin(), plan.groups.end(),
                     [c](const Group& g) { return g.collective == c; });
}
}  // namespace

std::size_t choose_plan(const std::vector<Plan>& candidates, double margin) {
  if (candidates.empty()) throw Error("omgs: choosing a plan needs at least one candidate");
  validate_choice_margin(margin);
  double best = candidates[0].predicted.iteration_end_s;
  for (const Plan& c : candidates) best = std::min(best, c.predicted.iteration_end_s);
  // Near-ties never go above a baseline candidate: the margin trades calibration noise
  // for fewer groups or less communication, never for a plan predicted slower than dense
  // or the sparse allreduce.
  double limit = best * (1.0 + margin);
  for (const Plan& c : candidates)
    if (is_baseline(c)) limit = std::min(limit, c.predicted.iteration_end_s);
  auto eligible = [limit](const Plan& c) { return c.predicted.iteration_end_s <= limit; };
  // Of the near-ties, those that do not communicate far more than the least of them.
  double least_comm = std::numeric_limits<double>::infinity();
  for (const Plan& c : candidates)
    if (eligible(c)) least_comm = std::min(least_comm, c.predicted.comm_total_s);
  const double comm_limit = least_comm * near_tie_comm_factor;
  std::size_t chosen = candidates.size();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Plan& c = candidates[i];
    if (!eligible(c) || !(c.predicted.comm_total_s <= comm_limit)) continue;
    if (chosen == candidates.size()) {
      chosen = i;
      continue;
    }
    const Plan& k = candidates[chosen];
    // Strictly better on (groups, collective mix); equal keys keep the earlier candidate.
    if (c.groups.size() < k.groups.size() ||
        (c.groups.size() == k.groups.size() && mix_complexity(c) < mix_complexity(k)))
      chosen = i;
  }
  return chosen;
}

Plan best_of(std::vector<Plan> candidates, double margin) {
  if (candidates.empty()) throw Error("omgs: best_of needs at least one plan");
  Plan plan = std::move(candidates[choose_plan(candidates, margin)]);
  plan.picked = plan.planner == Planner::mixed ? plan.picked : plan.planner;
  plan.planner = Planner::mixed;
  return plan;
}

}  // namespace omgs
