// The closed loop's refit and replan: the performance model fitted to the window's
// measured timelines (plan/timeline_fit.hpp) on points agreed across ranks (backward times
// included), so that every rank plans with bit-identical inputs;
// the plan switches only for a predicted gain of at least replan_min_gain.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include <omgs/detail/kokkos_helpers.hpp>

#include "comm/clock.hpp"
#include "comm/collectives.hpp"
#include "plan/collective_table.hpp"
#include "plan/loop_candidate.hpp"
#include "plan/timeline_fit.hpp"
#include "runtime/closed_loop.hpp"

namespace omgs::detail {

namespace {

/// What the refit takes from the model in force: the prior of its fit (the top-k, where the
/// model's is linear, and the line of every collective as the model predicts it at P, for a
/// fit that cannot separate intercepts; zeros where the model has no alpha-beta terms, e.g.
/// the reference model), and the model's lines as given, kept where the plan has no group
/// to fit them (a collective the plan does not use keeps its calibrated cost).
struct ModelPrior {
  FittedModel fit;
  std::map<std::string, CollectiveCosts, std::less<>> kept;
};

/// A fitted beta (per byte of fit_bytes) per byte of the line, for the line `name`.
double line_beta_per_fit_beta(const std::string& name, double pair_bytes) {
  for (const CollectiveRow& row : collective_rows())
    if (row.sparsifies && row.line == name && row.fit_in_8_byte_pairs) return 8.0 / pair_bytes;
  return 1.0;
}

ModelPrior prior_of(const PerfModel& model, int workers) {
  ModelPrior p;
  FittedModel& f = p.fit;
  for (const CollectiveRow& row : collective_rows())
    if (!row.line.empty()) f.lines[row.line] = {};
  const AlphaBetaModel* ab = model.as_alpha_beta();
  if (ab == nullptr) return p;
  p.kept.insert(ab->lines().begin(), ab->lines().end());
  for (auto& [name, line] : f.lines)
    if (const std::optional<AlphaBeta> at = ab->line_at(name, workers))
      line.fit = {at->alpha_s,
                  at->beta_s_per_byte / line_beta_per_fit_beta(name, ab->pair_bytes())};
  if (ab->topk_form() == TopkForm::linear) f.topk = {ab->topk_c0_s(), ab->topk_c1_s()};
  return p;
}

/// Per layer, in backward order (from layer L-1 down), the median over the window's
/// `filled` iterations of this rank's backward time from the start of the pass to the end
/// of that layer; a layer not measured in an iteration counts as `per_layer` (its median).
/// Non-increasing in l: each iteration's sums are, and medians keep the order.
std::vector<double> cumulative_medians(const std::vector<double>& window_bwd, std::size_t filled,
                                       const std::vector<double>& per_layer) {
  const std::size_t L = per_layer.size();
  std::vector<double> out(L, 0.0);  // a rank without a measured iteration defers to the others
  if (filled == 0) return out;
  std::vector<double> sums(filled * L);
  for (std::size_t i = 0; i < filled; ++i) {
    double running = 0.0;
    for (std::size_t l = L; l-- > 0;) {
      const double t = window_bwd[i * L + l];
      running += std::isnan(t) ? per_layer[l] : t;
      sums[l * filled + i] = running;
    }
  }
  for (std::size_t l = 0; l < L; ++l)
    out[l] = median({sums.begin() + l * filled, sums.begin() + (l + 1) * filled});
  return out;
}

}  // namespace

/// Collective, at the same iteration on every rank. A failure (agreed by every rank: every
/// input of a decision is identical everywhere) keeps the plan and settles the loop.
void ClosedLoop::refit(std::uint64_t iteration) noexcept {
  Kokkos::Profiling::pushRegion(OMGS_LABEL("omgs::refit"));
  const double t0 = now_s();
  RefitReport rep;
  rep.iteration = iteration;
  rep.iterations_fitted = filled;
  try {
    const int size = host_.plan_config().workers;
    ModelPrior prior = prior_of(host_.model(), size);
    std::vector<LayerSpec> next_layers = host_.layers();
    const double fit_t0 = now_s();
    const FittedModel f = agreed_fit(prior.fit, next_layers, rep);
    host_.record(TraceKind::refit_fit, -1, fit_t0, now_s());
    // Every line with groups in the plan fitted, the others as given (a line the model must
    // have and the model in force has not, e.g. the reference model's: the prior's at P).
    const double pb = host_.wire_pair_bytes();
    // The dense groups' bytes per element stay those of the form in force (their line is
    // fitted per byte of it: RuntimeOptions::dense_wire's 2 bytes for a 16-bit form).
    const AlphaBetaModel* in_force = host_.model().as_alpha_beta();
    std::map<std::string, CollectiveCosts, std::less<>> lines = std::move(prior.kept);
    for (const auto& [name, line] : f.lines) {
      if (line.groups == 0 && (lines.count(name) > 0 || !AlphaBetaModel::requires_line(name)))
        continue;
      const double beta = line.fit.c1 * line_beta_per_fit_beta(name, pb);
      lines[name] = CollectiveCosts{{{size, {line.fit.c0, beta}}}, false, {}};
    }
    AlphaBetaModel refitted =
        AlphaBetaModel::from_lines(TopkForm::linear, f.topk.c0, f.topk.c1, std::move(lines))
            .with_pair_bytes(pb)
            .with_allreduce_element_bytes(in_force ? in_force->allreduce_element_bytes() : 4.0);
    auto fitted = std::make_unique<AlphaBetaModel>(std::move(refitted));
    switch_plan(std::move(fitted), std::move(next_layers), rep);
  } catch (const std::exception& e) {
    host_.set_error(std::string("omgs: the closed loop's refit failed (") + e.what() +
                    "); the plan in force is kept and the loop stopped");
    settled = true;
  }
  rep.settled = settled;
  last_refit_ = std::move(rep);
  const bool changed = last_refit_.switched || last_refit_.taken_back;
  host_.record(changed ? TraceKind::replan : TraceKind::refit, -1, t0, now_s());
  Kokkos::Profiling::popRegion();
}

/// The fitted lines (top-k and one per collective of the plan's groups, dense ones
/// included, the prior's others; plan/timeline_fit.hpp) and the layers' backward times (into
/// next_layers), identical on every rank. The points are agreed first, in one allreduce of medians
/// over the window: per layer the slowest rank's backward up to the end of that layer (cumulative:
/// the layers' times are the differences, so that the pass takes as long as the slowest rank's; the
/// slowest rank per layer, summed, would add up stalls that hit different ranks at different
/// layers), per group the slowest rank's sparsify (the slowest rank sets the pace: a group's
/// allgather starts when the last rank posts it), and per group the fastest rank's exchange
/// (allgather, sparse or dense allreduce: the others' include waiting for the last rank to post, a
/// skew of compute, not a cost of the network). Collective.
FittedModel ClosedLoop::agreed_fit(const FittedModel& prior, std::vector<LayerSpec>& next_layers,
                                   RefitReport& rep) {
  const Plan& plan = host_.plan();
  const std::size_t L = next_layers.size(), G = plan.groups.size();
  const MPI_Comm comm = host_.comm();
  const PlanConfig config = host_.plan_config();
  GroupPoints p;
  p.sparsify_s.assign(G, 0.0);  // a rank without a measured iteration defers to the others
  p.allgather_s.assign(G, std::numeric_limits<double>::infinity());
  // L cumulative backward times, then sparsify (G), then -allgather (G).
  std::vector<double> all = cumulative_medians(window_bwd, filled, backward_medians());
  if (filled > 0) {
    p = group_medians(G, window.data(), filled);
    rep.measured_s = median(measured_ends());
    rep.owner_wait_s = median({window_wait.begin(), window_wait.begin() + filled});
  }
  all.insert(all.end(), p.sparsify_s.begin(), p.sparsify_s.end());
  for (double a : p.allgather_s) all.push_back(-a);
  all.push_back(filled > 0 ? median({window_iter.begin(), window_iter.begin() + filled}) : 0.0);
  max_over_ranks(comm, all);
  rep.measured_iteration_s = all.back();
  for (std::size_t l = 0; l < L; ++l)
    next_layers[l].backward_s = std::max(0.0, all[l] - (l + 1 < L ? all[l + 1] : 0.0));
  for (std::size_t g = 0; g < G; ++g) {
    p.sparsify_s[g] = all[L + g];
    p.allgather_s[g] = -all[L + G + g];
  }
  for (const Group& g : plan.groups) rep.group_numel.push_back(g.numel);
  rep.group_sparsify_s = p.sparsify_s;
  rep.group_allgather_s = p.allgather_s;
  // The sparse allreduce's line per byte of the pair wire in force (its model counts them),
  // the dense allreduce's per byte of the dense form in force (the model's element bytes).
  const AlphaBetaModel* in_force = host_.model().as_alpha_beta();
  const LineFormat format{in_force ? in_force->allreduce_element_bytes() : 4.0,
                          host_.wire_pair_bytes()};
  const TimelineFit f = fit_points(plan.groups, p, config.workers, config.density, prior, format);
  FittedModel fitted{f.topk, f.lines};
  std::vector<double> c = fitted.pack();
  max_over_ranks(comm, c);  // identical already (same points, same code): made certain
  fitted.unpack(c);
  return fitted;
}

/// Per layer the median of its measured backward times in the window; a layer never
/// measured gets the time per element of the others (0 for all without a measurement).
std::vector<double> ClosedLoop::backward_medians() const {
  const std::vector<LayerSpec>& layers = host_.layers();
  const std::size_t L = layers.size();
  std::vector<double> out(L, nan_s), v;
  for (std::size_t l = 0; l < L; ++l) {
    v.clear();
    for (std::size_t i = 0; i < filled; ++i)
      if (!std::isnan(window_bwd[i * L + l])) v.push_back(window_bwd[i * L + l]);
    if (!v.empty()) out[l] = median(v);
  }
  fill_by_rate(layers, out);
  return out;
}

/// The measured iteration ends of the window's filled slots.
std::vector<double> ClosedLoop::measured_ends() const {
  std::vector<double> ends;
  for (std::size_t i = 0; i < filled; ++i) ends.push_back(window[i].iteration_end_s);
  return ends;
}

/// The decision's inputs (plan/loop_decision.hpp), every one agreed across ranks.
LoopInputs ClosedLoop::loop_inputs(const RefitReport& rep, bool candidate_differs) const {
  LoopInputs in;
  in.candidate_differs = candidate_differs;
  in.predicted_current_s = rep.predicted_current_s;
  in.predicted_candidate_s = rep.predicted_candidate_s;
  in.min_gain = replan_min_gain;
  in.replans = replans;
  in.max_replans = max_replans;
  in.explored = explored;
  in.verifying = last_refit_.switched;  // the previous refit's: this window follows its switch
  in.measured_s = rep.measured_iteration_s;
  in.measured_before_s = last_refit_.measured_iteration_s;
  return in;
}

/// The loop's candidate under the fitted model (plan/loop_candidate.hpp): the configured
/// planner's plan, unless a plan of the automatic candidates (single, layerwise, optimal, ...;
/// optimal under loop_optimal_budget(); all-sparse ones for an all-sparse planner) is
/// predicted at least replan_min_gain faster than it; then the fastest. Unless that is
/// predicted to gain on `current` (the plan in force under the fitted model), the plan
/// loop_proposal names for the one exploration (decide() tries it on a predicted tie). Every input
/// is agreed, so every rank gets the same plan (which install_plan checks). Not collective.
Plan ClosedLoop::candidate_plan(const std::vector<LayerSpec>& layers, const PerfModel& fitted,
                                const Plan& current) const {
  std::vector<Plan> plans;
  const OptimalBudget budget = loop_optimal_budget();
  const SparseOnlyModel sparse(fitted);
  const PerfModel& model = sparse_only_planner(planner) ? sparse : fitted;
  for (Planner p : loop_planners(planner, model, host_.plan_config()))
    plans.push_back(host_.plan_for(p, layers, model, plans.empty() ? OptimalBudget{} : budget));
  const std::size_t c = loop_proposal(plans, replan_min_gain, current);
  return std::move(plans[c]);
}

/// The fitted model and backward times replace the ones in force; then the loop's decision
/// (plan/loop_decision.hpp) on agreed inputs: take back the last switch if it measured
/// slower than the plan it replaced (that plan returns with its own window's model and
/// backward times), else switch to the loop's candidate (candidate_plan) if it is
/// predicted to gain at least replan_min_gain (or, once, within the tie margin either way:
/// replan_min_gain, or the choice margin for a plan that communicates far less than the plan
/// in force, loop_explore_margin), within max_replans. Collective.
void ClosedLoop::switch_plan(std::unique_ptr<PerfModel> fitted, std::vector<LayerSpec> next_layers,
                             RefitReport& rep) {
  const PlanConfig config = host_.plan_config();
  const Plan& plan = host_.plan();
  Plan current = make_plan_from_groups(plan.planner, next_layers, plan.groups, *fitted, config);
  current.picked = plan.picked;
  current.status = plan.status;
  current.gap_bound_s = plan.gap_bound_s;
  current.status_note = plan.status_note;
  Plan candidate = candidate_plan(next_layers, *fitted, current);
  rep.predicted_current_s = current.predicted.iteration_end_s;
  rep.predicted_candidate_s = candidate.predicted.iteration_end_s;
  rep.candidate_groups = candidate.groups.size();
  rep.candidate_planner = candidate.planner;
  rep.model = fitted->describe();
  LoopInputs in = loop_inputs(rep, !same_groups(candidate.groups, plan.groups));
  in.explore_margin = loop_explore_margin(candidate, current);
  const LoopDecision d = decide(in);
  ++model_generation;
  settled = d.settled;
  if (d.action == LoopAction::take_back) {
    // The plan that measured faster returns with the model and backward times fitted to its
    // own window, still in force: the window just fitted is the slower plan's.
    rep.taken_back = true;
    rep.model = host_.model().describe();
    host_.install_plan(std::move(before));
    return;
  }
  host_.set_planning_inputs(std::move(next_layers), std::move(fitted));
  if (d.action == LoopAction::keep) {
    host_.install_plan(std::move(current), PlanChange::repredict);  // the instance stays
    return;
  }
  rep.switched = true;
  rep.explored = d.action == LoopAction::explore;
  explored = explored || rep.explored;
  before = std::move(current);
  host_.install_plan(std::move(candidate));
  ++replans;
}

}  // namespace omgs::detail
