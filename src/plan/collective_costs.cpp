// Per-P tables and formulas of P for the collectives of an AlphaBetaModel.
#include "collective_costs.hpp"

#include <cmath>
#include <sstream>

namespace omgs::detail {

namespace {
std::string show(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

bool bad(double v) {
  return !std::isfinite(v) || v < 0.0;
}

const JsonValue& number_member(const JsonValue& obj, const char* key, const std::string& where) {
  const JsonValue* v = obj.find(key);
  if (v == nullptr) throw Error(where + ": missing member \"" + key + "\"");
  if (!v->is(JsonValue::Kind::number))
    throw Error(where + ": member \"" + key + "\" must be a number, not a " +
                json_kind_name(v->kind()));
  if (bad(v->number()))
    throw Error(where + ":" + std::to_string(v->line()) + ": " + key + " = " + show(v->number()) +
                " (must be finite and >= 0)");
  return *v;
}

CollectiveFormula read_formula(const JsonValue& f, const std::string& where) {
  if (!f.is(JsonValue::Kind::object)) throw Error(where + " must be an object");
  for (const auto& [key, value] : f.object())
    if (key != "alpha_s" && key != "alpha_log2p_s" && key != "alpha_p_s" &&
        key != "beta_s_per_byte")
      throw Error(where + ": unknown member \"" + key +
                  "\" (expected alpha_s, alpha_log2p_s, alpha_p_s, beta_s_per_byte)");
  CollectiveFormula r;
  auto optional = [&](const char* key, double& out) {
    if (f.find(key) != nullptr) out = number_member(f, key, where).number();
  };
  r.alpha_s = number_member(f, "alpha_s", where).number();
  optional("alpha_log2p_s", r.alpha_log2p_s);
  optional("alpha_p_s", r.alpha_p_s);
  r.beta_s_per_byte = number_member(f, "beta_s_per_byte", where).number();
  return r;
}
}  // namespace

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::allgather:
      return "allgather";
    case CollectiveKind::allreduce:
      return "allreduce";
    case CollectiveKind::sparse_allreduce:
      return "sparse_allreduce";
  }
  return "?";
}

double table_bytes(CollectiveKind kind, std::uint64_t numel, int workers, double density,
                   double element_bytes, double pair_bytes) {
  if (kind == CollectiveKind::allgather)
    return AlphaBetaModel::bytes_received(numel, workers, density) * (pair_bytes / 8.0);
  if (kind == CollectiveKind::sparse_allreduce)
    return AlphaBetaModel::sparse_allreduce_bytes(numel, workers, density, pair_bytes);
  return element_bytes * static_cast<double>(numel);
}

double wire_bytes(CollectiveKind kind, std::uint64_t numel, int workers, double density,
                  double element_bytes, double pair_bytes) {
  const double others = static_cast<double>(workers) - 1.0;
  if (kind == CollectiveKind::allgather)
    return others * static_cast<double>(selected_count(numel, density)) * pair_bytes;
  if (kind == CollectiveKind::sparse_allreduce)
    return AlphaBetaModel::sparse_allreduce_bytes(numel, workers, density, pair_bytes);
  return 2.0 * others / static_cast<double>(workers) * element_bytes * static_cast<double>(numel);
}

std::optional<double> collective_time(const CollectiveCosts& costs, CollectiveKind kind,
                                      std::uint64_t numel, int workers, double density,
                                      double element_bytes, double pair_bytes) {
  if (numel == 0) return 0.0;
  auto it = costs.table.find(workers);
  if (it != costs.table.end())
    return it->second.alpha_s + it->second.beta_s_per_byte * table_bytes(kind, numel, workers,
                                                                         density, element_bytes,
                                                                         pair_bytes);
  if (!costs.has_formula) return std::nullopt;
  const CollectiveFormula& f = costs.formula;
  const double p = static_cast<double>(workers);
  return f.alpha_s + f.alpha_log2p_s * std::log2(p) + f.alpha_p_s * (p - 1.0) +
         f.beta_s_per_byte * wire_bytes(kind, numel, workers, density, element_bytes, pair_bytes);
}

std::optional<CostIssue> check_costs(const CollectiveCosts& costs, CollectiveKind kind) {
  const std::string name = collective_name(kind);
  const std::string finite = " (must be finite and >= 0)";
  for (const auto& [p, ab] : costs.table) {
    const std::string entry = name + " entry for workers " + std::to_string(p) + ": ";
    if (p < 1)
      return CostIssue{name + " entry for workers " + std::to_string(p), " (must be >= 1)"};
    if (bad(ab.alpha_s)) return CostIssue{entry + "alpha_s", " = " + show(ab.alpha_s) + finite};
    if (bad(ab.beta_s_per_byte))
      return CostIssue{entry + "beta_s_per_byte", " = " + show(ab.beta_s_per_byte) + finite};
  }
  if (!costs.has_formula) return std::nullopt;
  const CollectiveFormula& f = costs.formula;
  const std::pair<const char*, double> fields[] = {{"alpha_s", f.alpha_s},
                                                   {"alpha_log2p_s", f.alpha_log2p_s},
                                                   {"alpha_p_s", f.alpha_p_s},
                                                   {"beta_s_per_byte", f.beta_s_per_byte}};
  for (const auto& [field, v] : fields)
    if (bad(v)) return CostIssue{name + "_formula " + field, " = " + show(v) + finite};
  return std::nullopt;
}

void read_costs(const JsonValue& doc, CollectiveKind kind, const std::string& source,
                CollectiveCosts& costs) {
  const std::string name = collective_name(kind);
  if (const JsonValue* f = doc.find(name + "_formula")) {
    costs.formula = read_formula(*f, source + ": " + name + "_formula");
    costs.has_formula = true;
  }
  if (kind == CollectiveKind::allgather) return;  // its table is read by perf_model.cpp
  const JsonValue* t = doc.find(name);
  if (t == nullptr) return;
  if (!t->is(JsonValue::Kind::array))
    throw Error(source + ": member \"" + name + "\" must be an array");
  for (std::size_t i = 0; i < t->array().size(); ++i) {
    const std::string where = source + ": " + name + "[" + std::to_string(i) + "]";
    const JsonValue& e = t->array()[i];
    if (!e.is(JsonValue::Kind::object)) throw Error(where + " must be an object");
    const double p = number_member(e, "workers", where).number();
    if (p != std::floor(p) || p < 1 || p > 1e9)
      throw Error(where + ": \"workers\" must be a positive integer");
    AlphaBeta ab{number_member(e, "alpha_s", where).number(),
                 number_member(e, "beta_s_per_byte", where).number()};
    if (!costs.table.emplace(static_cast<int>(p), ab).second)
      throw Error(where + ": a second entry for workers = " + std::to_string(static_cast<int>(p)));
  }
}

std::string costs_json(const CollectiveCosts& costs, CollectiveKind kind) {
  const std::string name = collective_name(kind);
  std::string s;
  if (kind != CollectiveKind::allgather && !costs.table.empty()) {
    s += ",\n  \"" + name + "\": [";
    bool first = true;
    for (const auto& [p, ab] : costs.table) {
      s += first ? "\n" : ",\n";
      first = false;
      s += "    {\"workers\": " + std::to_string(p) + ", \"alpha_s\": " + json_number(ab.alpha_s) +
           ", \"beta_s_per_byte\": " + json_number(ab.beta_s_per_byte) + "}";
    }
    s += "\n  ]";
  }
  if (costs.has_formula) {
    const CollectiveFormula& f = costs.formula;
    s += ",\n  \"" + name + "_formula\": {\"alpha_s\": " + json_number(f.alpha_s) +
         ", \"alpha_log2p_s\": " + json_number(f.alpha_log2p_s) +
         ", \"alpha_p_s\": " + json_number(f.alpha_p_s) +
         ", \"beta_s_per_byte\": " + json_number(f.beta_s_per_byte) + "}";
  }
  return s;
}

std::string describe_costs(const CollectiveCosts& costs, CollectiveKind kind) {
  std::ostringstream os;
  const char* name = collective_name(kind);
  if (kind != CollectiveKind::allgather)
    for (const auto& [p, ab] : costs.table)
      os << " " << name << " P=" << p << ": " << ab.alpha_s << " + " << ab.beta_s_per_byte
         << "*bytes s;";
  if (costs.has_formula) {
    const CollectiveFormula& f = costs.formula;
    if (kind != CollectiveKind::allgather) os << " " << name;
    os << " any P: " << f.alpha_s << " + " << f.alpha_log2p_s << "*log2(P) + " << f.alpha_p_s
       << "*(P-1) + " << f.beta_s_per_byte << "*wire_bytes s;";
  }
  return os.str();
}

}  // namespace omgs::detail
