// The performance models' costs by collective name (PerfModel::collective_s): the defaults
// through the built-in collectives' virtuals, and an AlphaBetaModel's lines
// (collective_costs.hpp), with the sparse allreduce's formula derived from the allgather's
// and the allreduce's (docs/planner.md, "The third exchange").
#include <algorithm>
#include <string>

#include <omgs/plan.hpp>

#include "plan/collective_costs.hpp"

namespace omgs {

namespace {
[[noreturn]] void throw_no_collective(const PerfModel& model, std::string_view name, int workers) {
  throw Error("omgs: the performance model " + model.describe() + " knows no collective named \"" +
              std::string(name) + "\" (asked for P = " + std::to_string(workers) + ")");
}

const CollectiveCosts& empty_costs() {
  static const CollectiveCosts none;
  return none;
}
}  // namespace

bool PerfModel::knows_collective(std::string_view name, int workers) const {
  if (name == "allreduce") return knows_allreduce(workers);
  if (name == "sparse_allreduce") return knows_sparse_allreduce(workers);
  if (name != "allgather") return false;
  try {
    check_workers(workers);
    return true;
  } catch (const Error&) {
    return false;
  }
}

double PerfModel::collective_s(std::string_view name, std::uint64_t numel, int workers,
                               double density) const {
  if (name == "allgather") return allgather_s(numel, workers, density);
  if (name == "allreduce") return allreduce_s(numel, workers);
  if (name == "sparse_allreduce") return sparse_allreduce_s(numel, workers, density);
  throw_no_collective(*this, name, workers);
}

double PerfModel::allreduce_s(std::uint64_t, int workers) const {
  throw Error("omgs: the performance model " + describe() +
              " has no dense allreduce cost for P = " + std::to_string(workers) +
              " (give an \"allreduce\" table or \"allreduce_formula\")");
}

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
  // The histogram round (comm/tagged_sum.hpp): recursive doubling, ceil(log2 P) steps each
  // receiving the coarse and the seeded fine histogram and the error slot (2 x 1024 + 1
  // int64). The counts travel as the messages' sizes: no bytes of their own.
  int steps = 0;
  while ((1LL << steps) < static_cast<long long>(workers)) ++steps;
  constexpr double histogram_round = (2.0 * 1024.0 + 1.0) * 8.0;
  return (p - 1.0) / p * 2.0 * pair_bytes * k + steps * histogram_round;
}

void AlphaBetaModel::derive() {
  effective_.clear();
  for (const auto& [name, costs] : lines_)
    effective_.emplace(name, Line{costs, detail::find_line_kind(name)});
  const CollectiveCosts& ag = allgather_costs();
  const CollectiveCosts& ar = allreduce_costs();
  if (!ag.has_formula || !ar.has_formula) return;
  Line& sar = effective_["sparse_allreduce"];
  if (sar.kind == nullptr) sar.kind = detail::find_line_kind("sparse_allreduce");
  CollectiveCosts& c = sar.costs;
  if (c.has_formula) return;
  c.has_formula = true;
  // docs/planner.md: the pairs' and the survivors' point-to-point rounds as the allgather's
  // fixed and per-peer terms (one step latency per peer too: the region owners' incast), the
  // histogram round(s) as one allreduce of log2 P latency.
  c.formula.alpha_s = ar.formula.alpha_s + 2.0 * ag.formula.alpha_s;
  c.formula.alpha_log2p_s = ar.formula.alpha_log2p_s;
  c.formula.alpha_p_s = 2.0 * ag.formula.alpha_p_s + ag.formula.alpha_log2p_s;
  c.formula.beta_s_per_byte = std::max(ag.formula.beta_s_per_byte, ar.formula.beta_s_per_byte);
}

bool AlphaBetaModel::knows_collective(std::string_view name, int workers) const {
  const auto it = effective_.find(name);
  return it != effective_.end() && it->second.costs.knows(workers);
}

double AlphaBetaModel::collective_s(std::string_view name, std::uint64_t numel, int workers,
                                    double density) const {
  const auto it = effective_.find(name);
  if (it != effective_.end()) {
    const detail::LineFormat format{allreduce_element_bytes_, pair_bytes_};
    if (const auto t = detail::collective_time(it->second.costs, *it->second.kind, numel, workers,
                                               density, format))
      return *t;
  } else if (numel == 0 && detail::find_line_kind(name) != nullptr) {
    return 0.0;  // as a line would predict it
  }
  throw_unknown(name, workers);
}

void AlphaBetaModel::throw_unknown(std::string_view name, int workers) const {
  const detail::LineKind* kind = detail::find_line_kind(name);
  if (kind == nullptr) throw_no_collective(*this, name, workers);
  throw Error("omgs: the performance model " + describe() + " has no " + kind->words +
              " cost for P = " + std::to_string(workers) + " (" + kind->hint + ")");
}

double AlphaBetaModel::allgather_s(std::uint64_t numel, int workers, double density) const {
  return collective_s("allgather", numel, workers, density);
}

bool AlphaBetaModel::knows_allreduce(int workers) const {
  return knows_collective("allreduce", workers);
}

double AlphaBetaModel::allreduce_s(std::uint64_t numel, int workers) const {
  return collective_s("allreduce", numel, workers, 1.0);
}

bool AlphaBetaModel::knows_sparse_allreduce(int workers) const {
  return knows_collective("sparse_allreduce", workers);
}

double AlphaBetaModel::sparse_allreduce_s(std::uint64_t numel, int workers, double density) const {
  return collective_s("sparse_allreduce", numel, workers, density);
}

const CollectiveCosts* AlphaBetaModel::line(std::string_view name) const {
  const auto it = lines_.find(name);
  return it == lines_.end() ? nullptr : &it->second;
}

std::optional<AlphaBeta> AlphaBetaModel::line_at(std::string_view name, int workers) const {
  const auto it = effective_.find(name);
  if (it == effective_.end()) return std::nullopt;
  const CollectiveCosts& c = it->second.costs;
  if (const auto at = c.table.find(workers); at != c.table.end()) return at->second;
  if (!c.has_formula || workers < 1) return std::nullopt;
  return AlphaBeta{detail::formula_alpha_s(c.formula, workers), c.formula.beta_s_per_byte};
}

AlphaBetaModel AlphaBetaModel::from_lines(
    TopkForm form, double c0_s, double c1_s,
    std::map<std::string, CollectiveCosts, std::less<>> lines) {
  for (const auto& [name, costs] : lines)
    if (detail::find_line_kind(name) == nullptr)
      throw Error("omgs: alpha-beta model: no collective named \"" + name +
                  "\" is registered (detail::register_line_bytes) to give a line to");
  const auto ag = lines.find("allgather");
  AlphaBetaModel m(form, c0_s, c1_s, ag == lines.end() ? CollectiveCosts{} : ag->second, {});
  for (auto& [name, costs] : lines)
    if (!costs.empty()) m.lines_[name] = std::move(costs);
  m.check_and_derive();
  return m;
}

AlphaBetaModel AlphaBetaModel::with_line(std::string name, CollectiveCosts costs) const {
  if (detail::find_line_kind(name) == nullptr)
    throw Error("omgs: alpha-beta model: no collective named \"" + name +
                "\" is registered (detail::register_line_bytes) to give a line to");
  AlphaBetaModel m = *this;
  if (costs.empty() && name != "allgather")
    m.lines_.erase(name);
  else
    m.lines_[std::move(name)] = std::move(costs);
  m.check_and_derive();
  return m;
}

AlphaBetaModel AlphaBetaModel::with_sparse_allreduce(CollectiveCosts costs) const {
  return with_line("sparse_allreduce", std::move(costs));
}

const CollectiveCosts& AlphaBetaModel::allgather_costs() const {
  const CollectiveCosts* c = line("allgather");
  return c == nullptr ? empty_costs() : *c;
}

const CollectiveCosts& AlphaBetaModel::allreduce_costs() const {
  const CollectiveCosts* c = line("allreduce");
  return c == nullptr ? empty_costs() : *c;
}

const CollectiveCosts& AlphaBetaModel::sparse_allreduce_costs() const {
  const CollectiveCosts* c = line("sparse_allreduce");
  return c == nullptr ? empty_costs() : *c;
}

const CollectiveCosts& AlphaBetaModel::sparse_allreduce_effective_costs() const {
  const auto it = effective_.find("sparse_allreduce");
  return it == effective_.end() ? empty_costs() : it->second.costs;
}

}  // namespace omgs
