// The optimal planner: dynamic programming over group boundaries, bounded by an
// OptimalBudget (docs/reliability.md, "Optimal planner").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include <omgs/plan.hpp>

#include "plan/collective_table.hpp"
#include "plan/pipeline.hpp"

namespace omgs {

// ---------------------------------------------------------------------------------------
// State after the groups covering layers [i, L): (E, D) = (end of the last top-k, end of
// the last communication). Appending the group [j, i) maps it (detail::pipeline_step) to
//   E' = (E + tb[j,i)) + ts,  D' = max(D, E') + tc,
// monotone non-decreasing in E and D (also in floating point), so a state dominated in
// both is never needed: each boundary keeps the Pareto front of its states. The backward
// time of a group is summed from its highest layer down, as predict() does, so the
// optimum found here is bit-identical to predict() of the returned grouping.
//
// Bounds (OptimalBudget). A front larger than its cap F is thinned: the smallest tau is
// chosen such that a greedy cover keeps at most F states, every dropped state having a
// kept one with E and D at most tau larger. The map above is 1-Lipschitz in
// max(|dE|, |dD|), so the kept state's descendants end at most that much later than the
// dropped one's. Each state carries the error `err` it may stand for (summed along a
// path, max over merged states); the largest err of any state is a proven bound on the
// gap to the optimum (up to rounding). States that cannot beat the MGS plan (D, or E plus
// the backward time still to come, above its iteration end) are dropped: exact.
// A pending front (one still receiving states) is cut when it has received more than 2F
// states since its last cut and thinned only if more than F Pareto states remain, so at
// most 3F states are held per boundary. It keeps only its Pareto states as they arrive
// (merged in a total order, state_before); the errs of the dropped ones are handed to the
// kept states at the cut, as if they had been dropped there. Cost: pairs = L(L+1)/2
// model evaluations and at most pairs * F state updates.
// ---------------------------------------------------------------------------------------
// Collectives (docs/planner.md, "The table of collectives"): every group [j, i) is tried
// with the fastest allowed row of each choice class (detail::PlanRows: with a top-k, and
// without: E' = (E + tb) + 0, D' = max(D, E') + tc), the same monotone map, so the fronts
// stay exact and the search covers boundaries and choices.
namespace {
struct DpState {
  double compute_end;
  double comm_end;
  double err;             // how much later than a dropped state this one may end
  std::uint32_t from;     // boundary of the previous state (the group is [this, from))
  std::uint32_t index;    // index of the previous state in front[from]
  std::uint32_t groups;   // how many groups the state's path has
  std::uint8_t choice;    // the group's choice class (detail::PlanRows)
  Collective collective;  // the class's row for the group
};
static_assert(sizeof(DpState) <= 40, "a state stays at 40 bytes (OptimalBudget::max_states)");

class FrontSearch {
 public:
  FrontSearch(const std::vector<LayerSpec>& layers, const PerfModel& model,
              const detail::PlanRows& rows, std::size_t cap, double upper)
      : layers_(layers), model_(model), rows_(rows), cap_(cap), upper_(upper) {}

  void run();
  // The best grouping found (empty if every state was pruned), plan order.
  std::vector<Group> best() const;
  double max_err() const { return max_err_; }
  bool thinned() const { return thinned_; }

 private:
  void thin(std::vector<DpState>& states, std::size_t cap);
  void expand(std::size_t i);
  // Merges the states of run_ (each sorted here) into front j, dropping dominated states.
  void merge_runs(std::size_t j);
  // Cuts front j as drop_dominated would: the errs of the states dropped since the last
  // cut go to the kept states that stand for them.
  void settle(std::size_t j);

  const std::vector<LayerSpec>& layers_;
  const PerfModel& model_;
  const detail::PlanRows& rows_;
  const std::size_t cap_;  // F
  const double upper_;
  std::vector<std::vector<DpState>> front_;
  std::vector<double> backward_below_;         // sum of backward_s of layers [0, j)
  std::vector<std::vector<DpState>> dropped_;  // per front: dropped since the last cut, err > 0
  std::vector<std::size_t> pushed_;  // per front: states held at the last cut + pushed since
  std::vector<DpState> run_[detail::max_row_classes];  // the states one group adds, per class
  std::vector<DpState> both_, merged_;                 // merge_runs' buffers
  double max_err_ = 0.0;
  bool thinned_ = false;
};

// The order of a front: rising compute end, then comm end, then fewer groups (of two
// states that end alike, the one with fewer messages is kept), then the order in which the
// states are produced (groups ending higher first, then the previous state's index, then
// the choice class: the top-k's first). Total (no two states of a front share their
// predecessor and choice): a front's order does not depend on how the states were gathered.
bool state_before(const DpState& a, const DpState& b) {
  if (a.compute_end != b.compute_end) return a.compute_end < b.compute_end;
  if (a.comm_end != b.comm_end) return a.comm_end < b.comm_end;
  if (a.groups != b.groups) return a.groups < b.groups;
  if (a.from != b.from) return a.from > b.from;
  if (a.index != b.index) return a.index < b.index;
  return a.choice < b.choice;
}

// Greedy cover of a front (rising E, falling D) by states within tau of the covered ones
// in both E and D: (*rep)[s] is the kept state standing for s. Returns how many are kept;
// without rep, it stops counting above `limit`.
std::size_t cover(const std::vector<DpState>& st, double tau, std::vector<std::size_t>* rep,
                  std::size_t limit = SIZE_MAX) {
  if (rep) rep->assign(st.size(), 0);
  std::size_t kept = 0;
  for (std::size_t s0 = 0; s0 < st.size() && kept <= limit;) {
    std::size_t k = s0;  // the last state with E <= E(s0) + tau: D(k) <= D(s) for s <= k
    while (k + 1 < st.size() && st[k + 1].compute_end <= st[s0].compute_end + tau) ++k;
    std::size_t s = s0;
    while (s < st.size() && (s <= k || st[k].comm_end - st[s].comm_end <= tau)) {
      if (rep) (*rep)[s] = k;
      ++s;
    }
    ++kept;
    s0 = s;
  }
  return kept;
}

void FrontSearch::thin(std::vector<DpState>& states, std::size_t cap) {
  if (states.size() <= cap) return;
  thinned_ = true;
  // The smallest tau (to 1e-3 relative) whose cover keeps at most cap states.
  double lo = 0.0;
  double hi = std::max(states.back().compute_end - states.front().compute_end,
                       states.front().comm_end - states.back().comm_end);
  std::vector<std::size_t> rep;
  for (int it = 0; it < 40 && hi - lo > 1e-3 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    (cover(states, mid, nullptr, cap) <= cap ? hi : lo) = mid;
  }
  cover(states, hi, &rep);
  for (std::size_t s = 0; s < states.size(); ++s) {
    DpState& k = states[rep[s]];
    const double extra =
        std::max({0.0, k.compute_end - states[s].compute_end, k.comm_end - states[s].comm_end});
    k.err = std::max(k.err, states[s].err + extra);
    max_err_ = std::max(max_err_, k.err);
  }
  std::size_t kept = 0;
  for (std::size_t s = 0; s < states.size(); ++s)
    if (rep[s] == s) states[kept++] = states[s];
  states.resize(kept);
}

// Whether a sorted run has a state that no state of the front or of the run before it
// dominates. If not, the front is the union's Pareto front: a front state dominated by a
// run state is dominated by whatever dominates that one.
bool adds_state(const std::vector<DpState>& front, const std::vector<DpState>& run) {
  std::size_t a = 0;
  for (const DpState& st : run) {
    while (a < front.size() && state_before(front[a], st)) ++a;
    if (a == 0 || st.comm_end < front[a - 1].comm_end) return true;
  }
  return false;
}

void FrontSearch::merge_runs(std::size_t j) {
  for (std::vector<DpState>& r : run_)
    if (!std::is_sorted(r.begin(), r.end(), state_before))
      std::sort(r.begin(), r.end(), state_before);
  const std::vector<DpState>* runs = nullptr;
  for (const std::vector<DpState>& r : run_) {
    if (r.empty()) continue;
    if (runs == nullptr) {
      runs = &r;
      continue;
    }
    merged_.clear();
    std::merge(runs->begin(), runs->end(), r.begin(), r.end(), std::back_inserter(merged_),
               state_before);
    both_.swap(merged_);
    runs = &both_;
  }
  if (runs == nullptr) return;
  if (runs->empty()) return;
  std::vector<DpState>& to = front_[j];
  if (!adds_state(to, *runs)) {  // the front stays as it is
    for (const DpState& st : *runs)
      if (st.err > 0.0) dropped_[j].push_back(st);
    return;
  }
  // drop_dominated's pass over the union of two sorted fronts, in merge order.
  merged_.clear();
  auto keep = [&](const DpState& st) {
    if (merged_.empty() || st.comm_end < merged_.back().comm_end)
      merged_.push_back(st);
    else if (st.err > 0.0)
      dropped_[j].push_back(st);
  };
  std::size_t a = 0;
  for (const DpState& st : *runs) {
    while (a < to.size() && state_before(to[a], st)) keep(to[a++]);
    keep(st);
  }
  while (a < to.size()) keep(to[a++]);
  to.swap(merged_);
}

void FrontSearch::settle(std::size_t j) {
  // drop_dominated merges a dropped state's err into the last kept state before it.
  std::vector<DpState>& st = front_[j];
  for (const DpState& x : dropped_[j]) {
    DpState& k = *(std::upper_bound(st.begin(), st.end(), x, state_before) - 1);
    k.err = std::max(k.err, x.err);
  }
  dropped_[j].clear();
  dropped_[j].shrink_to_fit();
}

void FrontSearch::expand(std::size_t i) {
  const std::vector<DpState>& from = front_[i];
  const std::size_t classes = rows_.classes();
  const bool topk = rows_.sparsifying_class() < classes;

  double tb = 0.0;
  std::uint64_t numel = 0;
  for (std::size_t j = i; j-- > 0;) {
    tb = tb + layers_[j].backward_s;
    numel += layers_[j].numel;
    const double ts = topk ? model_.topk_s(numel) : 0.0;
    // Whatever follows still needs the backward time of layers [0, j); a margin of 1e-9
    // keeps the differently ordered sum from pruning a state that ties with MGS.
    const double still = backward_below_[j];
    // One run per choice class: the source front rises in E and the map is monotone, so
    // each run is (nearly always) sorted already and is merged into the sorted front, and
    // once E' is too late for a state it is for every later one.
    for (std::size_t c = 0; c < classes; ++c) {
      std::vector<DpState>& run = run_[c];
      run.clear();
      const detail::RowPick pick = rows_.pick(c, numel);
      if (!pick.serves) continue;  // no allowed row of this class can serve the group
      const double topk_s = rows_.sparsifies(c) ? ts : 0.0;
      for (std::size_t s = 0; s < from.size(); ++s) {
        const DpState& st = from[s];
        const GroupTiming t =
            detail::pipeline_step({st.compute_end, st.comm_end}, tb, topk_s, pick.comm_s);
        const double e = t.topk_end_s;
        const double d = t.comm_end_s;
        if ((e + still) > upper_ * (1.0 + 1e-9)) break;
        if (d > upper_) continue;
        run.push_back({e, d, st.err, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(s),
                       st.groups + 1, static_cast<std::uint8_t>(c), pick.collective});
      }
      pushed_[j] += run.size();
    }
    merge_runs(j);
    if (pushed_[j] > 2 * cap_) {
      settle(j);
      thin(front_[j], cap_);
      pushed_[j] = front_[j].size();
    }
  }
}

void FrontSearch::run() {
  const std::size_t L = layers_.size();
  front_.assign(L + 1, {});
  backward_below_.assign(L + 1, 0.0);
  for (std::size_t j = 0; j < L; ++j)
    backward_below_[j + 1] = backward_below_[j] + layers_[j].backward_s;
  dropped_.assign(L + 1, {});
  pushed_.assign(L + 1, 0);
  front_[L].push_back({0.0, 0.0, 0.0, 0, 0, 0, 0, Collective::sparse});
  for (std::size_t i = L; i >= 1; --i) {
    settle(i);
    thin(front_[i], cap_);
    front_[i].shrink_to_fit();
    expand(i);
  }
  settle(0);
}

std::vector<Group> FrontSearch::best() const {
  // The front is sorted by compute end with strictly falling comm end: the last state has
  // the smallest iteration end.
  std::vector<Group> groups;
  if (front_[0].empty()) return groups;
  std::size_t at = 0;
  std::size_t s = front_[0].size() - 1;
  while (at != layers_.size()) {
    const DpState& st = front_[at][s];
    groups.push_back({at, st.from, 0, st.collective});
    at = st.from;
    s = st.index;
  }
  std::reverse(groups.begin(), groups.end());
  return groups;
}

std::string number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
}  // namespace

namespace {
// The search with the given choices, starting from (and never worse than) `start`, the
// plan it returns when nothing beats it or the budget is too small for the search.
OptimalResult search(const std::vector<LayerSpec>& layers, const PerfModel& model,
                     const PlanConfig& config, const OptimalBudget& budget,
                     const detail::PlanRows& rows, std::vector<Group> start,
                     const char* start_name) {
  const std::size_t L = layers.size();
  OptimalResult r;
  r.groups = std::move(start);
  // A start some group of which its collective cannot serve bounds nothing.
  const double start_end = detail::serves_groups(layers, r.groups, config)
                               ? predict(layers, r.groups, model, config).iteration_end_s
                               : INFINITY;
  const double pairs = 0.5 * double(L) * double(L + 1);
  const double per_state = double(rows.classes());  // states pushed per pair
  const double cap =
      std::min({double(budget.max_front), (double(budget.max_work) - pairs) / (pairs * per_state),
                std::floor(double(budget.max_states) / (3.0 * double(L + 1)))});
  if (L > UINT32_MAX - 1 || !(cap >= 2.0)) {
    r.status = PlanStatus::fallback;
    r.gap_bound_s = -1.0;
    r.note = "optimal search skipped: " + std::to_string(L) + " layers need " +
             number("%.3g", pairs) + " model evaluations and fronts of at least 2 states, " +
             "over the budget (max_work " + number("%.3g", double(budget.max_work)) +
             ", max_states " + number("%.3g", double(budget.max_states)) + "); the " + start_name +
             " plan is used";
    return r;
  }
  const auto front_cap = static_cast<std::size_t>(cap);
  FrontSearch search(layers, model, rows, front_cap, start_end);
  search.run();
  std::vector<Group> best = search.best();
  if (!best.empty()) r.groups = std::move(best);  // else no state beat the start
  if (search.thinned()) {
    r.status = PlanStatus::approximate;
    r.gap_bound_s = search.max_err();
    const double end = predict(layers, r.groups, model, config).iteration_end_s;
    r.note = "Pareto fronts thinned to " + std::to_string(front_cap) + " states: at most " +
             number("%.3g", r.gap_bound_s) + " s (" +
             number("%.3g", end > 0 ? 100.0 * r.gap_bound_s / end : 0.0) + "%) above the optimum";
  }
  return r;
}

// Each group on the fastest row of class c that serves it.
std::vector<Group> with_rows(const std::vector<LayerSpec>& layers, std::vector<Group> groups,
                             const detail::PlanRows& rows, std::size_t c) {
  for (Group& g : groups)
    g.collective = rows.pick(c, detail::group_sums(layers, g).numel).collective;
  return groups;
}
}  // namespace

OptimalResult search_optimal(const std::vector<LayerSpec>& layers, const PerfModel& model,
                             const PlanConfig& config, const OptimalBudget& budget) {
  const detail::PlanRows rows(model, config, detail::PlanRows::Kinds::all);
  std::vector<Group> mgs = groups_mgs(layers, model, config);  // the rows with a top-k
  if (rows.classes() < 2) return search(layers, model, config, budget, rows, std::move(mgs), "MGS");
  // Start from the better of MGS and MGS with its collectives chosen (never worse).
  std::vector<Group> mixed = choose_collectives(layers, mgs, model, config);
  const bool better = predict(layers, mixed, model, config).iteration_end_s <
                      predict(layers, mgs, model, config).iteration_end_s;
  return search(layers, model, config, budget, rows, better ? std::move(mixed) : std::move(mgs),
                better ? "mgs_mixed" : "MGS");
}

std::vector<Group> groups_dense(const std::vector<LayerSpec>& layers, const PerfModel& model,
                                const PlanConfig& config) {
  const detail::PlanRows rows(model, config, detail::PlanRows::Kinds::not_sparsifying);
  rows.require("the dense planner");
  std::vector<Group> start = with_rows(layers, groups_single(layers), rows, 0);
  const char* name = "dense";
  if (detail::PlanRows(model, config, detail::PlanRows::Kinds::sparsifying).classes() != 0) {
    std::vector<Group> mgs = with_rows(layers, groups_mgs(layers, model, config), rows, 0);
    if (predict(layers, mgs, model, config).iteration_end_s <
        predict(layers, start, model, config).iteration_end_s)
      start = std::move(mgs);
  }
  return search(layers, model, config, {}, rows, std::move(start), name).groups;
}

std::vector<Group> groups_optimal(const std::vector<LayerSpec>& layers, const PerfModel& model,
                                  const PlanConfig& config) {
  return search_optimal(layers, model, config).groups;
}

}  // namespace omgs
