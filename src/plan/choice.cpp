// The collective of each group: names (the table's rows), the allowed set, and the choice
// for a fixed grouping (MGS's extension, Planner::mgs_mixed; docs/planner.md).
#include <algorithm>
#include <cstdint>
#include <string>

#include <omgs/error.hpp>
#include <omgs/plan.hpp>

#include "plan/collective_table.hpp"
#include "plan/pipeline.hpp"

namespace omgs {

std::string_view to_string(Collective collective) {
  const auto& rows = detail::collective_rows();
  const auto i = static_cast<std::size_t>(collective);
  return i < rows.size() ? std::string_view(rows[i].name) : std::string_view("unknown");
}

Collective parse_collective(std::string_view name) {
  if (const detail::CollectiveRow* row = detail::find_collective_row(name)) return row->id;
  std::string known;
  for (const detail::CollectiveRow& r : detail::collective_rows())
    known += (known.empty() ? "" : ", ") + r.name;
  throw Error("omgs: unknown collective '" + std::string(name) + "' (expected " + known + ")");
}

CollectiveSet parse_collective_set(std::string_view list) {
  CollectiveSet set;
  if (list.find_first_not_of(" ") == std::string_view::npos) return set;
  for (std::size_t start = 0; start <= list.size();) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view name = list.substr(start, end - start);
    const std::size_t first = name.find_first_not_of(' ');
    name = first == std::string_view::npos
               ? std::string_view()
               : name.substr(first, name.find_last_not_of(' ') - first + 1);
    if (name.empty())
      throw Error("omgs: the collectives '" + std::string(list) + "' have an empty name");
    set.insert(parse_collective(name));
    start = end + 1;
  }
  return set;
}

std::string to_string(const CollectiveSet& set) {
  std::string out;
  for (const detail::CollectiveRow& r : detail::collective_rows())
    if (set.contains(r.id)) out += (out.empty() ? "" : ",") + r.name;
  return out;
}

CollectiveSet allowed_collectives(const PlanConfig& config) {
  if (!config.collectives.empty()) return config.collectives;
  switch (config.sparse_exchange) {
    case SparseExchange::allgather:
      return {Collective::sparse, Collective::dense};
    case SparseExchange::allreduce:
      return {Collective::sparse_allreduce, Collective::dense};
    case SparseExchange::automatic:
      break;
  }
  // At two ranks the sparse allreduce moves the allgather's bytes (each rank's k pairs to
  // its one peer) plus a histogram round, so it cannot be faster; its line and the
  // allgather's, fitted apart, can still say otherwise there (docs/planner.md, "Defaults").
  if (config.workers == 2) return {Collective::sparse, Collective::dense};
  return {Collective::sparse, Collective::sparse_allreduce, Collective::dense};
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
    return !detail::collective_row(g.collective).sparsifies;  // no top-k: the whole gradient
  }));
}

namespace {
// After groups [0, g]: (end of the last top-k, end of the last communication), the state
// of the previous group it came from and the choice class (detail::PlanRows) of group g.
struct ChoiceState {
  double compute_end;
  double comm_end;
  std::uint32_t parent;
  std::uint8_t choice;
};

// The fronts of all groups together hold at most this many states (4 bytes each are kept
// for the way back: 16 MiB), and each at least 64.
constexpr std::size_t max_choice_states = std::size_t{1} << 22;

// Keeps the Pareto front: sorted by compute end, strictly falling comm end. Stable, and
// each class's states are pushed in class order, so ties keep the lower class (the top-k's).
// st[0, first) and st[first, end) are two classes' states: each is already sorted (the
// previous front is, and pipeline_step is monotone in it), and the merge, which keeps each
// range's order and puts the first range's states first among equals, sorts as
// std::stable_sort would.
void keep_front(std::vector<ChoiceState>& st, std::size_t first, std::size_t max_choice_front,
                std::vector<ChoiceState>& buffer) {
  auto before = [](const ChoiceState& a, const ChoiceState& b) {
    return a.compute_end < b.compute_end;
  };
  const auto mid = st.begin() + static_cast<std::ptrdiff_t>(first);
  if (std::is_sorted(st.begin(), mid, before) && std::is_sorted(mid, st.end(), before)) {
    // The merge, keeping only the states of the front as they come.
    buffer.clear();
    auto keep = [&](const ChoiceState& s) {
      if (buffer.empty() || s.comm_end < buffer.back().comm_end) buffer.push_back(s);
    };
    std::size_t a = 0;
    for (std::size_t b = first; b < st.size(); ++b) {
      while (a < first && !before(st[b], st[a])) keep(st[a++]);
      keep(st[b]);
    }
    while (a < first) keep(st[a++]);
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

// Each group's pick of every class. choose_collectives leaves out a class that cannot serve
// the group (unless none can: then the last class, and the runtime refuses the group).
std::vector<std::vector<detail::RowPick>> group_picks(const std::vector<LayerSpec>& layers,
                                                      const std::vector<Group>& groups,
                                                      const detail::PlanRows& rows) {
  std::vector<std::vector<detail::RowPick>> picks(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::uint64_t numel = detail::group_sums(layers, groups[g]).numel;
    for (std::size_t c = 0; c < rows.classes(); ++c) picks[g].push_back(rows.pick(c, numel));
  }
  return picks;
}
}  // namespace

std::vector<Group> choose_collectives(const std::vector<LayerSpec>& layers,
                                      std::vector<Group> groups, const PerfModel& model,
                                      const PlanConfig& config) {
  const detail::PlanRows rows(model, config, detail::PlanRows::Kinds::all);
  if (rows.classes() == 0 || groups.empty())
    return detail::with_sparse_rows(layers, std::move(groups), model, config);
  const std::vector<std::vector<detail::RowPick>> picks = group_picks(layers, groups, rows);
  for (std::size_t g = 0; g < groups.size(); ++g) groups[g].collective = picks[g][0].collective;
  if (rows.classes() == 1) return groups;
  predict(layers, groups, model, config);  // checks the partition and the first class's costs
  // back[g][s]: state s after group g came from state back[g][s] / classes of group g - 1,
  // and group g took class back[g][s] % classes (4 bytes per state are kept, not 24).
  const std::uint32_t classes = static_cast<std::uint32_t>(rows.classes());
  std::vector<std::vector<std::uint32_t>> back(groups.size());
  std::vector<ChoiceState> prev = {{0.0, 0.0, 0, 0}};
  std::vector<ChoiceState> next, buffer;
  const std::size_t cap = std::max<std::size_t>(64, max_choice_states / groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    // Summed as predict() does, so the result is bit-identical to it.
    const detail::GroupSums sums = detail::group_sums(layers, groups[g]);
    const double ts = model.topk_s(sums.numel);
    next.clear();
    std::size_t first = 0;  // where the second class's states start
    bool any = false;
    for (std::uint32_t c = 0; c < classes; ++c) {
      const detail::RowPick& pick = picks[g][c];
      const bool last = c + 1 == classes && !any;
      if (!pick.serves && !last) continue;
      if (any) first = next.size();
      any = true;
      for (std::size_t s = 0; s < prev.size(); ++s) {
        const GroupTiming t =
            detail::pipeline_step({prev[s].compute_end, prev[s].comm_end}, sums.backward_s,
                                  rows.sparsifies(c) ? ts : 0.0, pick.comm_s);
        next.push_back({t.topk_end_s, t.comm_end_s, static_cast<std::uint32_t>(s),
                        static_cast<std::uint8_t>(c)});
      }
    }
    keep_front(next, first == 0 ? next.size() : first, cap, buffer);
    for (const ChoiceState& st : next) back[g].push_back(st.parent * classes + st.choice);
    std::swap(prev, next);
  }
  std::uint32_t s = static_cast<std::uint32_t>(prev.size() - 1);  // the earliest comm end
  for (std::size_t g = groups.size(); g-- > 0;) {
    groups[g].collective = picks[g][back[g][s] % classes].collective;
    s = back[g][s] / classes;
  }
  return groups;
}

}  // namespace omgs
