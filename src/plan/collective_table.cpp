// The table of collectives (collective_table.hpp): the built-in rows, the registry, the
// choice classes a planning call uses.
#include "plan/collective_table.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace omgs::detail {

namespace {

double k_of(std::uint64_t numel, double density) {
  return static_cast<double>(selected_count(numel, density));
}

// k * P pairs, saturated (k <= 2^53, P <= 2^31).
std::uint64_t pairs_of(std::uint64_t numel, int workers, double density) {
  const std::uint64_t k = selected_count(numel, density);
  const auto p = static_cast<std::uint64_t>(std::max(workers, 1));
  return k > UINT64_MAX / p ? UINT64_MAX : k * p;
}

// Each rank sends its k pairs and receives P * k (exchange_allgather.cpp's buffers).
CollectiveRow allgather_row() {
  CollectiveRow r;
  r.name = "sparse";
  r.line = "allgather";
  r.sparsifies = true;
  r.time_s = [](const PerfModel& m, std::uint64_t n, int p, double d) {
    return m.allgather_s(n, p, d);
  };
  r.known = [](const PerfModel&, int) { return true; };  // check_workers refuses a bad P
  r.wire_bytes = [](std::uint64_t n, int p, double d) { return (p - 1.0) * k_of(n, d) * 8.0; };
  r.memory_bytes = [](std::uint64_t n, int p, double d) { return 8.0 * k_of(n, d) * (1.0 + p); };
  // The wire splits an exchange past an int over several posts of slices of the receive
  // buffer (or posts one MPI 4 large-count call): no post passes more than an int, whatever
  // k P (src/comm/wire_allgatherv.cpp).
  r.max_mpi_count = [](std::uint64_t n, int p, double d) {
    return std::min(pairs_of(n, p, d), mpi_int_count);
  };
  // The bytes received in 8-byte pairs: the refit converts its beta to the pair format.
  r.fit_bytes = [](std::uint64_t n, int p, double d, double) {
    return AlphaBetaModel::bytes_received(n, p, d);
  };
  r.fit_in_8_byte_pairs = true;
  return r;
}

// One MPI_Iallreduce of the group's floats, from the gradient into the aggregated buffer
// (several, of consecutive slices, past an int).
CollectiveRow allreduce_row() {
  CollectiveRow r;
  r.name = "dense";
  r.line = "allreduce";
  r.baseline = true;
  r.time_s = [](const PerfModel& m, std::uint64_t n, int p, double) { return m.allreduce_s(n, p); };
  r.known = [](const PerfModel& m, int p) { return m.knows_allreduce(p); };
  r.wire_bytes = [](std::uint64_t n, int p, double) {
    return 2.0 * (p - 1.0) / p * 4.0 * static_cast<double>(n);
  };
  r.memory_bytes = [](std::uint64_t n, int, double) { return 2.0 * 4.0 * static_cast<double>(n); };
  // The wire splits a group past an int over several posts (or posts one MPI 4 large-count
  // call): no post passes more than an int, whatever n (src/comm/wire_allreduce.cpp).
  r.max_mpi_count = [](std::uint64_t n, int, double) { return std::min(n, mpi_int_count); };
  return r;
}

// The most survivors of a sparse allreduce over all regions (detail::sparse_allreduce::
// max_survivors): k + P - 1, the threshold bin's ties cut by region, at most n.
double sparse_allreduce_survivors(std::uint64_t n, int p, double d) {
  const double k = k_of(n, d);
  return k == 0.0 ? 0.0 : std::min(static_cast<double>(n), k + (std::max(p, 1) - 1.0));
}

// The 8-byte items detail::SparseAllreduce reserves with 8-byte pairs (its Room, which
// SparseAllreduce::room_items sums; the plan module has no MPI, so the formula is repeated
// here and a runtime test holds the two equal): this rank's pairs three times, the window
// (2 k) and its sort keys, the received / sort scratch, the region's sums three times (at
// most min(n / P + 1, 4 k)), the k + P - 1 survivors, k dropped: O(k + P).
double sparse_allreduce_room(std::uint64_t n, int p, double d) {
  const double k = k_of(n, d), window = std::max(1.0, 2.0 * k);
  const double region = std::floor(static_cast<double>(n) / p) + 1.0;
  const double sums = std::min(region, 2.0 * window);
  const double survivors = sparse_allreduce_survivors(n, p, d);
  const double received = std::max({window, k + sums, survivors});
  return 3.0 * k + received + 3.0 * sums + survivors + k + window;
}

// detail::SparseAllreduce (docs/comm.md): the exchange's k pairs and room for its k + P - 1
// survivors, k dropped, and the engine's room (exchange_sparse_allreduce.cpp's footprint).
CollectiveRow sparse_allreduce_row() {
  CollectiveRow r;
  r.name = "sparse_allreduce";
  r.line = "sparse_allreduce";
  r.sparsifies = true;
  r.baseline = true;
  r.time_s = [](const PerfModel& m, std::uint64_t n, int p, double d) {
    return m.sparse_allreduce_s(n, p, d);
  };
  r.known = [](const PerfModel& m, int p) { return m.knows_sparse_allreduce(p); };
  r.wire_bytes = [](std::uint64_t n, int p, double d) {
    return AlphaBetaModel::sparse_allreduce_bytes(n, p, d);
  };
  r.memory_bytes = [](std::uint64_t n, int p, double d) {
    const double k = k_of(n, d);
    return 8.0 * (k + sparse_allreduce_survivors(n, p, d) + k + sparse_allreduce_room(n, p, d));
  };
  r.max_mpi_count = pairs_of;
  r.fit_bytes = [](std::uint64_t n, int p, double d, double pair_bytes) {
    return AlphaBetaModel::sparse_allreduce_bytes(n, p, d, pair_bytes);
  };
  return r;
}

// The dense allreduce in two levels (exchange_allreduce_node.cpp): the same buffers and
// counts as the flat one, and its own line, "allreduce_node", which a model has only where
// it was given (a model file or with_line): the row is never chosen by a model without it.
CollectiveRow allreduce_node_row() {
  CollectiveRow r = allreduce_row();
  r.name = "allreduce_node";
  r.line = "allreduce_node";
  r.baseline = false;
  r.time_s = [](const PerfModel& m, std::uint64_t n, int p, double d) {
    return m.collective_s("allreduce_node", n, p, d);
  };
  r.known = [](const PerfModel& m, int p) { return m.knows_collective("allreduce_node", p); };
  // Its node steps pass n floats' counts and displacements in ints and do not split (the
  // wire refuses n past an int, src/comm/wire_allreduce_node.cpp).
  r.max_mpi_count = [](std::uint64_t n, int, double) { return n; };
  return r;
}

// The sparse node-summed exchange (exchange_sparse_node.cpp, docs/comm.md): one line of the
// whole exchange, "sparse_node", on the group's n floats (its node reduce-scatter; at a
// fixed density and node shape every step's bytes are proportional to n, and the model
// carries no node shape, so a table per P measured on the run's shape carries them all).
// Its top-k runs inside the exchange, on the host: no top-k on the compute stream. Opt-in, and
// never chosen by a model without the line.
CollectiveRow sparse_node_row() {
  CollectiveRow r;
  r.name = "sparse_node";
  r.line = "sparse_node";
  r.time_s = [](const PerfModel& m, std::uint64_t n, int p, double d) {
    return m.collective_s("sparse_node", n, p, d);
  };
  r.known = [](const PerfModel& m, int p) { return m.knows_collective("sparse_node", p); };
  // At most: the other shards of n floats into the node, this shard's pairs, the shard shared.
  r.wire_bytes = [](std::uint64_t n, int, double d) {
    return 4.0 * static_cast<double>(n) + 8.0 * k_of(n, d);
  };
  // The flat buffers' two floats an element, and the wire's host buffers (at most 16 n).
  r.memory_bytes = [](std::uint64_t n, int, double) { return 24.0 * static_cast<double>(n); };
  // Its node steps pass n floats' counts and displacements (the wire refuses n past an int).
  r.max_mpi_count = [](std::uint64_t n, int, double) { return n; };
  return r;
}

std::vector<CollectiveRow>& table() {
  static std::vector<CollectiveRow> rows = [] {
    std::vector<CollectiveRow> t;
    t.reserve(256);  // one per id: rows never move
    for (CollectiveRow r : {allgather_row(), allreduce_row(), sparse_allreduce_row(),
                            allreduce_node_row(), sparse_node_row()}) {
      r.id = static_cast<Collective>(t.size());
      t.push_back(std::move(r));
    }
    return t;
  }();
  return rows;
}

std::string known_names() {
  std::string s;
  for (const CollectiveRow& r : table()) s += (s.empty() ? "" : ", ") + r.name;
  return s;
}

}  // namespace

bool serves(const CollectiveRow& row, std::uint64_t numel, int workers, double density,
            const ServeLimits& limits) {
  if (!limits.holds(numel)) return false;
  if (limits.max_mpi_count != 0 &&
      row.max_mpi_count(numel, workers, density) > limits.max_mpi_count)
    return false;
  return limits.memory_budget_bytes == 0 || row.memory_bytes(numel, workers, density) <=
                                                static_cast<double>(limits.memory_budget_bytes);
}

bool serves_groups(const std::vector<LayerSpec>& layers, const std::vector<Group>& groups,
                   const PlanConfig& config) {
  const ServeLimits limits = serve_limits(config);
  if (limits.unlimited()) return true;
  for (const Group& g : groups) {
    std::uint64_t numel = 0;
    for (std::size_t l = g.begin; l < g.end && l < layers.size(); ++l) numel += layers[l].numel;
    if (!serves(collective_row(g.collective), numel, config.workers, config.density, limits))
      return false;
  }
  return true;
}

void drop_unserved(std::vector<Plan>& candidates, const std::vector<LayerSpec>& layers,
                   const PlanConfig& config) {
  std::vector<bool> served(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i)
    served[i] = serves_groups(layers, candidates[i].groups, config);
  if (std::find(served.begin(), served.end(), true) == served.end()) return;
  std::vector<Plan> kept;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (served[i]) kept.push_back(std::move(candidates[i]));
  candidates = std::move(kept);
}

const std::vector<CollectiveRow>& collective_rows() {
  return table();
}

const CollectiveRow& collective_row(Collective c) {
  const auto i = static_cast<std::size_t>(c);
  const std::vector<CollectiveRow>& t = table();
  if (i < t.size()) return t[i];
  throw Error("omgs: collective " + std::to_string(i) + " has no row in the table of " +
              "collectives (known: " + known_names() + ")");
}

const CollectiveRow* find_collective_row(std::string_view name) {
  for (const CollectiveRow& r : table())
    if (r.name == name) return &r;
  return nullptr;
}

Collective register_collective(CollectiveRow row) {
  if (row.name.empty()) throw Error("omgs: a collective's row needs a name");
  if (find_collective_row(row.name) != nullptr)
    throw Error("omgs: a collective named '" + row.name + "' is already registered");
  if (!row.line.empty() && !row.time_s)
    row.time_s = [line = row.line](const PerfModel& m, std::uint64_t n, int p, double d) {
      return m.collective_s(line, n, p, d);
    };
  if (!row.line.empty() && !row.known)
    row.known = [line = row.line](const PerfModel& m, int p) {
      return m.knows_collective(line, p);
    };
  if (!row.time_s || !row.known || !row.wire_bytes || !row.memory_bytes || !row.max_mpi_count)
    throw Error("omgs: collective '" + row.name +
                "': its row needs time_s, known, wire_bytes, memory_bytes and max_mpi_count");
  std::vector<CollectiveRow>& t = table();
  if (t.size() >= 256)
    throw Error("omgs: the table of collectives is full (256 ids); '" + row.name +
                "' is not registered");
  row.id = static_cast<Collective>(t.size());
  t.push_back(std::move(row));
  return t.back().id;
}

PlanRows::PlanRows(const PerfModel& model, const PlanConfig& config, Kinds kinds)
    : model_(model),
      workers_(config.workers),
      density_(config.density),
      limits_(serve_limits(config)),
      unlimited_(limits_.unlimited()),
      kinds_(kinds) {
  const CollectiveSet allowed = allowed_collectives(config);
  for (bool top_k : {true, false}) {
    if ((top_k && kinds == Kinds::not_sparsifying) || (!top_k && kinds == Kinds::sparsifying))
      continue;
    Class c{top_k, {}};
    for (const CollectiveRow& r : table()) {
      if (r.sparsifies != top_k || !allowed.contains(r.id)) continue;
      if (r.known(model, config.workers))
        c.rows.push_back(&r);
      else if (first_unknown_ == nullptr)
        first_unknown_ = &r;
    }
    if (!c.rows.empty()) classes_.push_back(std::move(c));
  }
}

void PlanRows::require(const std::string& who) const {
  if (!classes_.empty()) return;
  if (first_unknown_ != nullptr) first_unknown_->time_s(model_, 1, workers_, density_);
  const char* kind = kinds_ == Kinds::sparsifying       ? " with a top-k"
                     : kinds_ == Kinds::not_sparsifying ? " without a top-k"
                                                        : "";
  throw Error("omgs: " + who + " needs an allowed collective" + kind +
              " that the performance model " + model_.describe() + " knows for P = " +
              std::to_string(workers_) + " (allowed: PlanConfig::collectives or sparse_exchange)");
}

RowPick PlanRows::pick_among(const Class& k, std::uint64_t numel) const {
  const std::vector<const CollectiveRow*>& rows = k.rows;
  RowPick best, any;
  bool found = false, any_found = false;
  for (const CollectiveRow* r : rows) {
    const double t = r->time_s(model_, numel, workers_, density_);
    if (!any_found || t < any.comm_s) any = {t, r->id, false};
    any_found = true;
    if (!serves(*r, numel, workers_, density_, limits_)) continue;
    if (!found || t < best.comm_s) best = {t, r->id, true};
    found = true;
  }
  return found ? best : any;
}

bool PlanRows::posts(std::size_t c, std::uint64_t numel) const {
  if (!limits_.holds(numel)) return false;
  if (limits_.max_mpi_count == 0) return true;
  for (const CollectiveRow* r : classes_[c].rows)
    if (r->max_mpi_count(numel, workers_, density_) <= limits_.max_mpi_count) return true;
  return false;
}

std::size_t PlanRows::sparsifying_class() const {
  return !classes_.empty() && classes_[0].sparsifies ? 0 : classes_.size();
}

void check_collectives(const PerfModel& model, const PlanConfig& config) {
  const CollectiveSet allowed = allowed_collectives(config);
  for (std::size_t i = 0; i < 256; ++i)
    if (allowed.contains(static_cast<Collective>(i))) collective_row(static_cast<Collective>(i));
  const CollectiveRow* first = nullptr;
  for (const CollectiveRow& r : table()) {
    if (!r.sparsifies || !allowed.contains(r.id)) continue;
    if (r.known(model, config.workers)) return;
    if (first == nullptr) first = &r;
  }
  if (first == nullptr) return;
  first->time_s(model, 1, config.workers, config.density);  // throws, naming P
  throw Error("omgs: the performance model " + model.describe() + " knows no allowed " +
              "collective with a top-k (" + first->name +
              ", ...) for P = " + std::to_string(config.workers));
}

std::vector<Group> with_sparse_rows(const std::vector<LayerSpec>& layers, std::vector<Group> groups,
                                    const PerfModel& model, const PlanConfig& config) {
  const PlanRows rows(model, config, PlanRows::Kinds::sparsifying);
  rows.require("this planner");
  for (Group& g : groups) {
    std::uint64_t numel = 0;
    for (std::size_t l = g.begin; l < g.end; ++l) numel += layers[l].numel;
    g.collective = rows.pick(0, numel).collective;
  }
  return groups;
}

}  // namespace omgs::detail
