// The sparse allreduce's cost (AlphaBetaModel; docs/planner.md, "The third exchange").
// Which groups use it is the planner's choice among the rows of the table of collectives
// (collective_table.hpp).
#include <algorithm>
#include <string>

#include <omgs/plan.hpp>

#include "plan/collective_costs.hpp"

namespace omgs {

double PerfModel::sparse_allreduce_s(std::uint64_t, int workers, double) const {
  throw Error("omgs: the performance model " + describe() +
              " has no sparse allreduce cost for P = " + std::to_string(workers) +
              " (give a \"sparse_allreduce\" table or \"sparse_allreduce_formula\", or both "
              "\"allgather_formula\" and \"allreduce_formula\" to derive it from)");
}

double AlphaBetaModel::sparse_allreduce_bytes(std::uint64_t numel, int workers, double density,
                                              double pair_bytes) {
  const double p = static_cast<double>(workers);
  const double k = static_cast<double>(selected_count(numel, density));
  constexpr double histograms = 2.0 * 2.0 * 8192.0;  // two 8 KiB ring allreduces
  return (p - 1.0) / p * (2.0 * pair_bytes * k + histograms) + 16.0 * (p - 1.0);
}

void AlphaBetaModel::derive_sparse_allreduce() {
  sparse_effective_ = sparse_allreduce_;
  CollectiveCosts& c = sparse_effective_;
  if (c.has_formula || !allgather_costs_.has_formula || !allreduce_.has_formula) return;
  const CollectiveFormula& ag = allgather_costs_.formula;
  const CollectiveFormula& ar = allreduce_.formula;
  c.has_formula = true;
  c.formula.alpha_s = 2.0 * ar.alpha_s + 2.0 * ag.alpha_s;
  c.formula.alpha_log2p_s = 2.0 * ar.alpha_log2p_s + 2.0 * ag.alpha_log2p_s;
  c.formula.alpha_p_s = 2.0 * ag.alpha_p_s + ag.alpha_log2p_s;
  c.formula.beta_s_per_byte = std::max(ag.beta_s_per_byte, ar.beta_s_per_byte);
}

bool AlphaBetaModel::knows_sparse_allreduce(int workers) const {
  return sparse_effective_.knows(workers);
}

double AlphaBetaModel::sparse_allreduce_s(std::uint64_t numel, int workers, double density) const {
  const auto t =
      detail::collective_time(sparse_effective_, detail::CollectiveKind::sparse_allreduce, numel,
                              workers, density, allreduce_element_bytes_, pair_bytes_);
  if (!t) return PerfModel::sparse_allreduce_s(numel, workers, density);  // throws
  return *t;
}

AlphaBetaModel AlphaBetaModel::with_sparse_allreduce(CollectiveCosts costs) const {
  if (auto issue = detail::check_costs(costs, detail::CollectiveKind::sparse_allreduce))
    throw Error("omgs: alpha-beta model: " + issue->field + issue->reason);
  AlphaBetaModel m = *this;
  m.sparse_allreduce_ = std::move(costs);
  m.derive_sparse_allreduce();
  return m;
}

}  // namespace omgs
