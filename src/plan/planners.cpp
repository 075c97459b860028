#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include <omgs/plan.hpp>

#include "plan/collective_table.hpp"
#include "plan/pipeline.hpp"

namespace omgs {

Planner parse_planner(std::string_view name) {
  for (Planner p : all_planners())
    if (to_string(p) == name) return p;
  for (Planner p : choice_planners())
    if (to_string(p) == name) return p;
  if (name == to_string(Planner::automatic)) return Planner::automatic;
  throw Error("omgs: unknown planner '" + std::string(name) +
              "' (expected mgs, layerwise, single, threshold, optimal, mgs_mixed, dense, mixed or "
              "automatic)");
}

std::string_view to_string(Planner planner) {
  switch (planner) {
    case Planner::mgs:
      return "mgs";
    case Planner::layerwise:
      return "layerwise";
    case Planner::single:
      return "single";
    case Planner::threshold:
      return "threshold";
    case Planner::optimal:
      return "optimal";
    case Planner::mgs_mixed:
      return "mgs_mixed";
    case Planner::dense:
      return "dense";
    case Planner::mixed:
      return "mixed";
    case Planner::automatic:
      return "automatic";
  }
  return "?";
}

std::string_view to_string(PlanStatus status) {
  switch (status) {
    case PlanStatus::complete:
      return "complete";
    case PlanStatus::approximate:
      return "approximate";
    case PlanStatus::fallback:
      return "fallback";
  }
  return "?";
}

const std::vector<Planner>& all_planners() {
  static const std::vector<Planner> planners = {Planner::layerwise, Planner::single,
                                                Planner::threshold, Planner::mgs, Planner::optimal};
  return planners;
}

const std::vector<Planner>& choice_planners() {
  static const std::vector<Planner> planners = {Planner::mgs_mixed, Planner::dense, Planner::mixed};
  return planners;
}

namespace {

// Groups in plan order from the set of "cuts": cut[l] == true separates layer l from l - 1.
std::vector<Group> groups_from_cuts(const std::vector<char>& cut, std::size_t num_layers) {
  std::vector<Group> groups;
  std::size_t end = num_layers;
  for (std::size_t l = num_layers; l-- > 1;) {
    if (cut[l]) {
      groups.push_back({l, end, 0});
      end = l;
    }
  }
  groups.push_back({0, end, 0});
  return groups;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// MGS (Shi et al., INFOCOM 2020), the seed's _generate_groups_mgs.
//
// The seed keeps per-layer arrays taob (backward start), taos (top-k start), ts (top-k
// time), taoc (communication start), tc (communication time), p (numel) and tb (backward
// time), sweeps l = L-2 .. 1 and merges layer l into l-1 when the time the merge waits for
// is smaller than the allgather start-up it saves. After every merge it recomputes the
// arrays below l and all of taoc, which makes it O(L^2).
//
// The decision at l reads only index l (taoc, taos, ts, p, tb), and the untouched
// originals of index l-1. A merge changes indices l and l-1 only; every later read of the
// recomputed arrays at index i < l sees exactly the value that the one-step recurrences
//   taob[i] = taos[i+1] + ts[i+1],  taos[i] = taob[i] + tb[i],
//   taoc[i] = max(taoc[i+1] + tc[i+1], taos[i] + ts[i])
// produce from index i+1 as it stands when the sweep reaches i: one step of the pipeline
// recurrence (detail::pipeline_step, which evaluates them with the seed's operands in the
// seed's order). So the sweep below carries only the entry of the current index and the
// state it was stepped from: O(L), identical decisions.
//
// Quirks kept on purpose (they are the published algorithm):
//  * the sweep never decides between layers L-1 and L-2: they always share a group (unless a
//    run's limits cannot post them together), although the timeline used for the decisions
//    still treats L-1 as a group of its own;
//  * after a merge at l the seed leaves taos[l] stale (tb[l] became 0) and recomputes
//    taoc[l] from it; the stale value can never win the max at l-1 (its own top-k start
//    is later), so this changes nothing, but it is reproduced rather than argued;
//  * L == 1: the seed would list the only layer twice; here it forms one group, once.
// ---------------------------------------------------------------------------------------
std::vector<Group> groups_mgs(const std::vector<LayerSpec>& layers, const PerfModel& model,
                              const PlanConfig& config) {
  const std::size_t L = layers.size();
  if (L <= 1) return detail::with_sparse_rows(layers, {{0, L, 0}}, model, config);
  auto topk = [&](std::uint64_t n) { return model.topk_s(n); };
  // A group's exchange: the fastest allowed row with a top-k (the allgather by default).
  const detail::PlanRows rows(model, config, detail::PlanRows::Kinds::sparsifying);
  rows.require("the mgs planner");
  auto allgather = [&](std::uint64_t n) { return rows.pick(0, n).comm_s; };

  struct Entry {               // one index of the seed's arrays
    detail::PipelineState in;  // taob and the communication end (taoc + tc) of the index above
    GroupTiming t;             // taob, taos, taos + ts, taoc, taoc + tc
    double tb;
    std::uint64_t p;
  };
  auto entry = [&](const detail::PipelineState& in, double tb, std::uint64_t p) {
    return Entry{in, detail::pipeline_step(in, tb, topk(p), allgather(p)), tb, p};
  };

  std::vector<char> cut(L, 0);
  // Under a run's limits the seed's one fixed merge (L-1 into L-2, below) is held back too
  // where no row could post it and each of the two alone can: the set-up would refuse it.
  if (!rows.posts(0, layers[L - 1].numel + layers[L - 2].numel) &&
      rows.posts(0, layers[L - 1].numel) && rows.posts(0, layers[L - 2].numel))
    cut[L - 1] = 1;
  // Index L-1 starts at 0 and its communication waits for nothing but its top-k (the seed's
  // taoc[L-1] = taos[L-1] + ts[L-1]): max(-inf, x) is x, except for a NaN x, which makes
  // every later taos and hence every tw NaN, so every decision is the seed's (no merge).
  const double no_comm = -std::numeric_limits<double>::infinity();
  const Entry top = entry({0.0, no_comm}, layers[L - 1].backward_s, layers[L - 1].numel);
  Entry cur = entry(detail::pipeline_after(top.t), layers[L - 2].backward_s, layers[L - 2].numel);

  std::uint64_t open = layers[L - 2].numel + (cut[L - 1] ? 0 : layers[L - 1].numel);
  for (std::size_t l = L - 2; l >= 1; --l) {
    const std::uint64_t p_below = layers[l - 1].numel;
    const double tb_below = layers[l - 1].backward_s;
    const double tw = tb_below + topk(cur.p + p_below) - topk(cur.p) - topk(p_below) -
                      (cur.t.comm_start_s - cur.t.topk_end_s);
    const double tsave = allgather(cur.p) + allgather(p_below) - allgather(cur.p + p_below);
    // Under a run's MPI count limit, no merge into a group that no row can post (the sparse
    // allreduce's k P past an int) of two that can: the set-up would refuse it. Without a
    // limit (predictions, the seed's algorithm) this never holds a merge back. `open` is the
    // group's numel (cur.p, plus layer L-1's while the group holds it: no cut is made there).
    const bool postable =
        rows.posts(0, open + p_below) || !rows.posts(0, open) || !rows.posts(0, p_below);
    if (tw < tsave && postable) {
      // __merge(l): index l - 1 absorbs index l, whose tb, p, ts, tc become 0. The seed's
      // taoc[l] then comes from its stale taos[l] (tb[l] as before the merge) plus ts[l] = 0:
      // index l stepped again from where it started, with no top-k and no communication.
      const double zero = 0.0;
      const GroupTiming emptied = detail::pipeline_step(cur.in, cur.tb, zero, zero);
      // Index l - 1 starts at taob[l] + tb[l] (tb[l] is 0 now), after taoc[l] + tc[l].
      cur = entry({cur.t.backward_start_s + zero, emptied.comm_end_s}, tb_below + cur.tb,
                  p_below + cur.p);
      open += p_below;
    } else {
      cut[l] = 1;
      cur = entry(detail::pipeline_after(cur.t), tb_below, p_below);
      open = p_below;
    }
  }
  std::vector<Group> groups = groups_from_cuts(cut, L);
  for (Group& g : groups)
    g.collective = rows.pick(0, detail::group_sums(layers, g).numel).collective;
  return groups;
}

std::vector<Group> groups_layerwise(const std::vector<LayerSpec>& layers) {
  std::vector<char> cut(layers.size(), 1);
  return groups_from_cuts(cut, layers.size());
}

std::vector<Group> groups_single(const std::vector<LayerSpec>& layers) {
  return {{0, layers.size(), 0}};
}

// The original code's _generate_groups_with_threshold: walk in backward order, adding
// layers to the open group; close it once it holds at least threshold_numel elements.
std::vector<Group> groups_threshold(const std::vector<LayerSpec>& layers,
                                    std::uint64_t threshold_numel) {
  std::vector<Group> groups;
  std::size_t end = layers.size();
  std::uint64_t acc = 0;
  for (std::size_t l = layers.size(); l-- > 0;) {
    acc += layers[l].numel;
    if (acc >= threshold_numel) {
      groups.push_back({l, end, 0});
      end = l;
      acc = 0;
    }
  }
  if (end > 0) groups.push_back({0, end, 0});
  return groups;
}

std::vector<Group> groups_optimal_exhaustive(const std::vector<LayerSpec>& layers,
                                             const PerfModel& model, const PlanConfig& config) {
  const std::size_t L = layers.size();
  const detail::PlanRows rows(model, config, detail::PlanRows::Kinds::all);
  rows.require("the exhaustive optimal planner");
  const std::uint64_t classes = rows.classes();
  const std::size_t max_layers = classes > 1 ? 12 : 20;
  if (L > max_layers)
    throw Error("omgs: the exhaustive optimal planner tries 2^(L-1) groupings" +
                std::string(classes > 1 ? " and every collective of each group" : "") +
                " and accepts at most " + std::to_string(max_layers) + " layers, not " +
                std::to_string(L));
  std::vector<Group> best;
  double best_end = 0.0;
  bool best_served = false;
  std::vector<detail::RowPick> picks;
  std::vector<char> cut(L, 0);
  const std::uint64_t count = std::uint64_t{1} << (L - 1);
  for (std::uint64_t mask = 0; mask < count; ++mask) {
    for (std::size_t l = 1; l < L; ++l) cut[l] = static_cast<char>((mask >> (l - 1)) & 1u);
    std::vector<Group> groups = groups_from_cuts(cut, L);
    picks.clear();            // picks[g * classes + c]: group g's pick of class c
    std::uint64_t kinds = 1;  // classes^groups: one class per group, digit g in base classes
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::uint64_t numel = detail::group_sums(layers, groups[g]).numel;
      for (std::size_t c = 0; c < classes; ++c) picks.push_back(rows.pick(c, numel));
      kinds *= classes;
    }
    for (std::uint64_t choice = 0; choice < kinds; ++choice) {
      bool served = true;
      std::uint64_t digits = choice;
      for (std::size_t g = 0; g < groups.size(); ++g, digits /= classes) {
        const detail::RowPick& pick = picks[g * classes + digits % classes];
        served = served && pick.serves;
        groups[g].collective = pick.collective;
      }
      if (best_served && !served) continue;  // a group no allowed row can serve
      const double end = predict(layers, groups, model, config).iteration_end_s;
      if (best.empty() || (served && !best_served) || end < best_end) {
        best_end = end;
        best = groups;
        best_served = served;
      }
    }
  }
  return best;
}

namespace {
// Whether the model predicts, for P, a collective without a top-k (the dense allreduce):
// then the planners that choose per group have something to choose.
bool knows_unsparsified(const PerfModel& model, int workers) {
  for (const detail::CollectiveRow& r : detail::collective_rows())
    if (!r.sparsifies && r.known(model, workers)) return true;
  return false;
}
}  // namespace

const std::vector<Planner>& mixed_candidates(const PerfModel& model, int workers) {
  static const std::vector<Planner> all = {Planner::mgs, Planner::mgs_mixed, Planner::optimal,
                                           Planner::dense};
  static const std::vector<Planner> sparse = {Planner::mgs, Planner::optimal};
  return knows_unsparsified(model, workers) ? all : sparse;
}

const std::vector<Planner>& automatic_candidates(const PerfModel& model, int workers) {
  static const std::vector<Planner> all = {Planner::mgs,      Planner::mgs_mixed, Planner::optimal,
                                           Planner::dense,    Planner::threshold, Planner::single,
                                           Planner::layerwise};
  static const std::vector<Planner> sparse = {Planner::mgs, Planner::optimal, Planner::threshold,
                                              Planner::single, Planner::layerwise};
  return knows_unsparsified(model, workers) ? all : sparse;
}

namespace {

/// The candidates' plans, each planned once (threshold only with threshold_numel > 0). When
/// more than one collective with a top-k is usable (SparseExchange::automatic), MGS with
/// every group on each baseline one of them (the sparse allreduce) joins them: a baseline
/// that near-ties never go above (choose_plan).
std::vector<Plan> plan_candidates(const std::vector<Planner>& planners,
                                  const std::vector<LayerSpec>& layers, const PerfModel& model,
                                  const PlanConfig& config, const OptimalBudget& budget) {
  // The dense planner only where the config allows a collective without a top-k.
  const bool unsparsified =
      detail::PlanRows(model, config, detail::PlanRows::Kinds::not_sparsifying).classes() != 0;
  std::vector<Plan> plans;
  for (Planner p : planners)
    if ((p != Planner::threshold || config.threshold_numel != 0) &&
        (p != Planner::dense || unsparsified))
      plans.push_back(make_plan(p, layers, model, config, budget));
  detail::drop_unserved(plans, layers, config);
  const CollectiveSet allowed = allowed_collectives(config);
  std::vector<const detail::CollectiveRow*> sparse;
  for (const detail::CollectiveRow& r : detail::collective_rows())
    if (r.sparsifies && allowed.contains(r.id) && r.known(model, config.workers))
      sparse.push_back(&r);
  if (sparse.size() < 2) return plans;
  for (const detail::CollectiveRow* r : sparse) {
    if (!r->baseline) continue;
    PlanConfig only = config;
    only.collectives = allowed;
    for (const detail::CollectiveRow* other : sparse)
      if (other != r) only.collectives.erase(other->id);
    plans.push_back(make_plan(Planner::mgs, layers, model, only, budget));
  }
  detail::drop_unserved(plans, layers, config);
  return plans;
}

}  // namespace

Plan make_plan(Planner planner, const std::vector<LayerSpec>& layers, const PerfModel& model,
               const PlanConfig& config, const OptimalBudget& budget) {
  validate_layers(layers);
  validate_density(config.density);
  validate_choice_margin(config.choice_margin);
  if (config.workers < 1)
    throw Error("omgs: workers = " + std::to_string(config.workers) + " (must be >= 1)");
  model.check_workers(config.workers);
  detail::check_collectives(model, config);
  std::vector<Group> groups;
  switch (planner) {
    case Planner::mgs:
      groups = groups_mgs(layers, model, config);
      break;
    case Planner::layerwise:
      groups = detail::with_sparse_rows(layers, groups_layerwise(layers), model, config);
      break;
    case Planner::single:
      groups = detail::with_sparse_rows(layers, groups_single(layers), model, config);
      break;
    case Planner::threshold:
      if (config.threshold_numel == 0)
        throw Error("omgs: the threshold planner needs threshold_numel > 0");
      groups = detail::with_sparse_rows(layers, groups_threshold(layers, config.threshold_numel),
                                        model, config);
      break;
    case Planner::optimal: {
      OptimalResult r = search_optimal(layers, model, config, budget);
      Plan plan = make_plan_from_groups(planner, layers, std::move(r.groups), model, config);
      plan.status = r.status;
      plan.gap_bound_s = r.gap_bound_s;
      plan.status_note = std::move(r.note);
      return plan;
    }
    case Planner::automatic: {  // the winner keeps its own name (Plan::planner)
      std::vector<Plan> candidates = plan_candidates(automatic_candidates(model, config.workers),
                                                     layers, model, config, budget);
      Plan plan = std::move(candidates[choose_plan(candidates, config.choice_margin)]);
      plan.picked = plan.planner;
      return plan;
    }
    case Planner::mgs_mixed:
      groups = choose_collectives(layers, groups_mgs(layers, model, config), model, config);
      break;
    case Planner::dense:
      groups = groups_dense(layers, model, config);
      break;
    case Planner::mixed:
      return best_of(
          plan_candidates(mixed_candidates(model, config.workers), layers, model, config, budget),
          config.choice_margin);
  }
  return make_plan_from_groups(planner, layers, std::move(groups), model, config);
}

}  // namespace omgs
