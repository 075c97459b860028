// The collective of each group (sparse, sparse allreduce or dense): names, and the choice
// for a fixed
// grouping (MGS's extension, Planner::mgs_mixed; docs/planner.md).
#include <algorithm>
#include <cstdint>
#include <string>

#include <omgs/error.hpp>
#include <omgs/plan.hpp>

#include "plan/pipeline.hpp"
#include "plan/sparse_exchange.hpp"

namespace omgs {

std::string_view to_string(Collective collective) {
  switch (collective) {
    case Collective::sparse:
      return "sparse";
    case Collective::dense:
      return "dense";
    case Collective::sparse_allreduce:
      return "sparse_allreduce";
  }
  return "unknown";
}

std::string_view to_string(SparseExchange exchange) {
  switch (exchange) {
    case SparseExchange::allgather:
      return "allgather";
    case SparseExchange::allreduce:
      return "allreduce";
    case SparseExchange::automatic:
      return "automatic";
  }
  return "unknown";
}

SparseExchange parse_sparse_exchange(std::string_view name) {
  for (SparseExchange e :
       {SparseExchange::allgather, SparseExchange::allreduce, SparseExchange::automatic})
    if (name == to_string(e)) return e;
  throw Error("omgs: unknown sparse exchange '" + std::string(name) +
              "' (expected allgather, allreduce or automatic)");
}

std::size_t Plan::dense_groups() const {
  return static_cast<std::size_t>(std::count_if(groups.begin(), groups.end(), [](const Group& g) {
    return g.collective == Collective::dense;
  }));
}

namespace {
// After groups [0, g]: (end of the last top-k, end of the last communication), the state
// of the previous group it came from and the collective of group g.
struct ChoiceState {
  double compute_end;
  double comm_end;
  std::uint32_t parent;
  bool dense;
};

// The fronts of all groups together hold at most this many states (4 bytes each are kept
// for the way back: 16 MiB), and each at least 64.
constexpr std::size_t max_choice_states = std::size_t{1} << 22;

// Keeps the Pareto front: sorted by compute end, strictly falling comm end. Stable, and
// sparse states are pushed first, so ties keep the sparse choice. st[0, sparse) and
// st[sparse, end) are the two choices' states: each is already sorted (the previous front
// is, and pipeline_step is monotone in it), and std::merge, which keeps each range's order
// and puts the first range's states first among equals, sorts as std::stable_sort would.
void keep_front(std::vector<ChoiceState>& st, std::size_t sparse, std::size_t max_choice_front,
                std::vector<ChoiceState>& buffer) {
  auto before = [](const ChoiceState& a, const ChoiceState& b) {
    return a.compute_end < b.compute_end;
  };
  const auto mid = st.begin() + static_cast<std::ptrdiff_t>(sparse);
  if (std::is_sorted(st.begin(), mid, before) && std::is_sorted(mid, st.end(), before)) {
    // The merge, keeping only the states of the front as they come.
    buffer.clear();
    auto keep = [&](const ChoiceState& s) {
      if (buffer.empty() || s.comm_end < buffer.back().comm_end) buffer.push_back(s);
    };
    std::size_t a = 0;
    for (std::size_t b = sparse; b < st.size(); ++b) {
      while (a < sparse && !before(st[b], st[a])) keep(st[a++]);
      keep(st[b]);
    }
    while (a < sparse) keep(st[a++]);
    st.swap(buffer);
  } else {
    std::stable_sort(st.begin(), st.end(), before);
    std::size_t kept = 0;
    for (const ChoiceState& s : st)
      if (kept == 0 || s.comm_end < st[kept - 1].comm_end) st[kept++] = s;
    st.resize(kept);
  }
  if (st.size() <= max_choice_front) return;
  // Evenly spaced states, the first (earliest compute) and last (earliest comm) included.
  std::vector<ChoiceState> thinned;
  for (std::size_t i = 0; i < max_choice_front; ++i)
    thinned.push_back(st[i * (st.size() - 1) / (max_choice_front - 1)]);
  st = std::move(thinned);
}
}  // namespace

std::vector<Group> choose_collectives(const std::vector<LayerSpec>& layers,
                                      std::vector<Group> groups, const PerfModel& model,
                                      const PlanConfig& config) {
  for (Group& g : groups) g.collective = Collective::sparse;
  if (!model.knows_allreduce(config.workers) || groups.empty())
    return detail::with_sparse_exchange(layers, std::move(groups), model, config);
  predict(layers, groups, model, config);  // checks the partition and the sparse costs
  // back[g][s]: state s after group g came from state back[g][s] >> 1 of group g - 1, and
  // group g is dense if its low bit is set (4 bytes per state are kept, not 24).
  std::vector<std::vector<std::uint32_t>> back(groups.size());
  std::vector<ChoiceState> prev = {{0.0, 0.0, 0, false}};
  std::vector<ChoiceState> next, buffer;
  const std::size_t cap = std::max<std::size_t>(64, max_choice_states / groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    // Summed as predict() does, so the result is bit-identical to it.
    const detail::GroupSums sums = detail::group_sums(layers, groups[g]);
    const double ts = model.topk_s(sums.numel);
    // The sparse choice is the exchange config.sparse_exchange gives (detail::sparse_cost).
    const double tc = detail::sparse_cost(model, sums.numel, config).comm_s;
    const double tr = model.allreduce_s(sums.numel, config.workers);
    next.clear();
    for (bool dense : {false, true}) {
      for (std::size_t s = 0; s < prev.size(); ++s) {
        const GroupTiming t =
            detail::pipeline_step({prev[s].compute_end, prev[s].comm_end}, sums.backward_s,
                                  dense ? 0.0 : ts, dense ? tr : tc);
        next.push_back({t.topk_end_s, t.comm_end_s, static_cast<std::uint32_t>(s), dense});
      }
    }
    keep_front(next, prev.size(), cap, buffer);
    for (const ChoiceState& st : next) back[g].push_back(st.parent << 1 | (st.dense ? 1u : 0u));
    std::swap(prev, next);
  }
  std::uint32_t s = static_cast<std::uint32_t>(prev.size() - 1);  // the earliest comm end
  for (std::size_t g = groups.size(); g-- > 0;) {
    groups[g].collective = (back[g][s] & 1u) != 0 ? Collective::dense : Collective::sparse;
    s = back[g][s] >> 1;
  }
  return detail::with_sparse_exchange(layers, std::move(groups), model, config);
}

}  // namespace omgs
