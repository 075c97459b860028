// The optimal planner: dynamic programming over group boundaries, bounded by an
// OptimalBudget (docs/reliability.md, "Optimal planner").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <omgs/plan.hpp>

namespace omgs {

// ---------------------------------------------------------------------------------------
// State after the groups covering layers [i, L): (E, D) = (end of the last top-k, end of
// the last communication). Appending the group [j, i) maps it to
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
// A pending front (one still receiving states) is cut to its Pareto states when it
// exceeds 2F and thinned only if more than F remain, so at most 3F states are held per
// boundary. Cost: pairs = L(L+1)/2 model evaluations and at most pairs * F state updates.
// ---------------------------------------------------------------------------------------
namespace {
struct DpState {
  double compute_end;
  double comm_end;
  double err;           // how much later than a dropped state this one may end
  std::uint32_t from;   // boundary of the previous state (the group is [this, from))
  std::uint32_t index;  // index of the previous state in front[from]
};

class FrontSearch {
 public:
  FrontSearch(const std::vector<LayerSpec>& layers, const PerfModel& model,
              const PlanConfig& config, std::size_t cap, double upper)
      : layers_(layers), model_(model), config_(config), cap_(cap), upper_(upper) {}

  void run();
  // The best grouping found (empty if every state was pruned), plan order.
  std::vector<Group> best() const;
  double max_err() const { return max_err_; }
  bool thinned() const { return thinned_; }

 private:
  void thin(std::vector<DpState>& states, std::size_t cap);
  void expand(std::size_t i);

  const std::vector<LayerSpec>& layers_;
  const PerfModel& model_;
  const PlanConfig& config_;
  const std::size_t cap_;  // F
  const double upper_;
  std::vector<std::vector<DpState>> front_;
  std::vector<double> backward_below_;  // sum of backward_s of layers [0, j)
  double max_err_ = 0.0;
  bool thinned_ = false;
};

// Removes dominated states (the dominating state stands for them, err included).
void drop_dominated(std::vector<DpState>& states) {
  std::sort(states.begin(), states.end(), [](const DpState& a, const DpState& b) {
    if (a.compute_end != b.compute_end) return a.compute_end < b.compute_end;
    return a.comm_end < b.comm_end;
  });
  std::size_t kept = 0;
  for (std::size_t s = 0; s < states.size(); ++s) {
    if (kept == 0 || states[s].comm_end < states[kept - 1].comm_end)
      states[kept++] = states[s];
    else
      states[kept - 1].err = std::max(states[kept - 1].err, states[s].err);
  }
  states.resize(kept);
}

// Greedy cover of a front (rising E, falling D) by states within tau of the covered ones
// in both E and D: rep[s] is the kept state standing for s. Returns how many are kept.
std::size_t cover(const std::vector<DpState>& st, double tau, std::vector<std::size_t>& rep) {
  rep.assign(st.size(), 0);
  std::size_t kept = 0;
  for (std::size_t s0 = 0; s0 < st.size();) {
    std::size_t k = s0;  // the last state with E <= E(s0) + tau: D(k) <= D(s) for s <= k
    while (k + 1 < st.size() && st[k + 1].compute_end <= st[s0].compute_end + tau) ++k;
    std::size_t s = s0;
    while (s < st.size() && (s <= k || st[k].comm_end - st[s].comm_end <= tau)) rep[s++] = k;
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
    (cover(states, mid, rep) <= cap ? hi : lo) = mid;
  }
  cover(states, hi, rep);
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

void FrontSearch::expand(std::size_t i) {
  const std::vector<DpState>& from = front_[i];

  double tb = 0.0;
  std::uint64_t numel = 0;
  for (std::size_t j = i; j-- > 0;) {
    tb = tb + layers_[j].backward_s;
    numel += layers_[j].numel;
    const double ts = model_.topk_s(numel);
    const double tc = model_.allgather_s(numel, config_.workers, config_.density);
    // Whatever follows still needs the backward time of layers [0, j); a margin of 1e-9
    // keeps the differently ordered sum from pruning a state that ties with MGS.
    const double still = backward_below_[j];
    std::vector<DpState>& to = front_[j];
    for (std::size_t s = 0; s < from.size(); ++s) {
      const double e = (from[s].compute_end + tb) + ts;
      const double d = std::max(from[s].comm_end, e) + tc;
      if (d > upper_ || (e + still) > upper_ * (1.0 + 1e-9)) continue;
      to.push_back(
          {e, d, from[s].err, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(s)});
    }
    if (to.size() > 2 * cap_) {
      drop_dominated(to);
      thin(to, cap_);
    }
  }
}

void FrontSearch::run() {
  const std::size_t L = layers_.size();
  front_.assign(L + 1, {});
  backward_below_.assign(L + 1, 0.0);
  for (std::size_t j = 0; j < L; ++j)
    backward_below_[j + 1] = backward_below_[j] + layers_[j].backward_s;
  front_[L].push_back({0.0, 0.0, 0.0, 0, 0});
  for (std::size_t i = L; i >= 1; --i) {
    drop_dominated(front_[i]);
    thin(front_[i], cap_);
    front_[i].shrink_to_fit();
    expand(i);
  }
  drop_dominated(front_[0]);
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
    groups.push_back({at, st.from, 0});
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

OptimalResult search_optimal(const std::vector<LayerSpec>& layers, const PerfModel& model,
                             const PlanConfig& config, const OptimalBudget& budget) {
  const std::size_t L = layers.size();
  OptimalResult r;
  r.groups = groups_mgs(layers, model, config);
  const double mgs_end = predict(layers, r.groups, model, config).iteration_end_s;
  const double pairs = 0.5 * double(L) * double(L + 1);
  const double cap = std::min({double(budget.max_front), (double(budget.max_work) - pairs) / pairs,
                               std::floor(double(budget.max_states) / (3.0 * double(L + 1)))});
  if (L > UINT32_MAX - 1 || !(cap >= 2.0)) {
    r.status = PlanStatus::fallback;
    r.gap_bound_s = -1.0;
    r.note = "optimal search skipped: " + std::to_string(L) + " layers need " +
             number("%.3g", pairs) + " model evaluations and fronts of at least 2 states, " +
             "over the budget (max_work " + number("%.3g", double(budget.max_work)) +
             ", max_states " + number("%.3g", double(budget.max_states)) +
             "); the MGS plan is used";
    return r;
  }
  const auto front_cap = static_cast<std::size_t>(cap);
  FrontSearch search(layers, model, config, front_cap, mgs_end);
  search.run();
  std::vector<Group> best = search.best();
  if (!best.empty()) r.groups = std::move(best);  // else no state beat MGS
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

std::vector<Group> groups_optimal(const std::vector<LayerSpec>& layers, const PerfModel& model,
                                  const PlanConfig& config) {
  return search_optimal(layers, model, config).groups;
}

}  // namespace omgs
