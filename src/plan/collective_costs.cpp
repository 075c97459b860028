// The lines of an AlphaBetaModel by collective name: the registry of the bytes each line's
// beta multiplies, per-P tables and formulas of P, their checks and JSON form.
#include "collective_costs.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <mutex>
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

namespace {
// The bytes of the built-in lines (docs/planner.md): the allgather's P * k * pair_bytes
// received bytes (the table's: P * k * 8 scaled by pair_bytes / 8; its formula's: the
// (P - 1) * k * pair_bytes from the other ranks), the
// allreduce's element_bytes * n gradient bytes (its formula: ring / Rabenseifner's
// 2 (P - 1) / P of them), the sparse allreduce's wire bytes (table and formula alike).
double allgather_table_bytes(std::uint64_t numel, int workers, double density, const LineFormat&) {
  return AlphaBetaModel::bytes_received(numel, workers, density);
}
double allgather_table_scale(const LineFormat& f) {
  return f.pair_bytes / 8.0;
}
double allgather_formula_bytes(std::uint64_t numel, int workers, double density,
                               const LineFormat& f) {
  const double others = static_cast<double>(workers) - 1.0;
  return others * static_cast<double>(selected_count(numel, density)) * f.pair_bytes;
}
double allreduce_table_bytes(std::uint64_t numel, int, double, const LineFormat& f) {
  return f.element_bytes * static_cast<double>(numel);
}
double allreduce_formula_bytes(std::uint64_t numel, int workers, double, const LineFormat& f) {
  const double others = static_cast<double>(workers) - 1.0;
  return 2.0 * others / static_cast<double>(workers) * f.element_bytes * static_cast<double>(numel);
}
double sparse_allreduce_bytes(std::uint64_t numel, int workers, double density,
                              const LineFormat& f) {
  return AlphaBetaModel::sparse_allreduce_bytes(numel, workers, density, f.pair_bytes);
}

std::string give(const std::string& name) {
  const bool vowel = std::string_view("aeiou").find(name.front()) != std::string_view::npos;
  return std::string("give ") + (vowel ? "an" : "a") + " \"" + name + "\" table or \"" + name +
         "_formula\"";
}

// The registry: built-ins first; entries are never removed, so pointers to them stay valid.
struct Registry {
  std::mutex mutex;
  std::deque<LineKind> kinds;
  Registry() {
    kinds.push_back({"allgather", allgather_table_bytes, allgather_formula_bytes, "allgather",
                     give("allgather"), allgather_table_scale});
    kinds.push_back({"allreduce", allreduce_table_bytes, allreduce_formula_bytes, "dense allreduce",
                     "give an \"allreduce\" table or \"allreduce_formula\"", nullptr});
    kinds.push_back({"sparse_allreduce", sparse_allreduce_bytes, sparse_allreduce_bytes,
                     "sparse allreduce",
                     give("sparse_allreduce") +
                         ", or both \"allgather_formula\" and \"allreduce_formula\" to derive "
                         "it from",
                     nullptr});
    // The two-level allreduce: one line of the whole exchange, on the flat allreduce's bytes
    // (docs/planner.md: the model carries no node shape, so the node's links and the fabric
    // are not separate terms; a table per P measured on the run's shape carries both).
    kinds.push_back({"allreduce_node", allreduce_table_bytes, allreduce_formula_bytes,
                     "two-level dense allreduce", give("allreduce_node"), nullptr});
    // The sparse node-summed exchange: one line of the whole exchange on the group's n floats
    // (table and formula alike; docs/planner.md).
    kinds.push_back({"sparse_node", allreduce_table_bytes, allreduce_table_bytes,
                     "sparse node-summed exchange", give("sparse_node"), nullptr});
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

const LineKind* find_locked(Registry& r, std::string_view name) {
  for (const LineKind& k : r.kinds)
    if (k.name == name) return &k;
  return nullptr;
}

void check_line_name(const std::string& name) {
  const auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  };
  const std::string suffix = "_formula";
  const bool formula = name.size() >= suffix.size() &&
                       name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (name.empty() || !std::all_of(name.begin(), name.end(), ok) || formula || name == "type" ||
      name == "topk" || name == "allreduce_element_bytes")
    throw Error("omgs: register_line_bytes: \"" + name +
                "\" cannot name a collective's line (lowercase letters, digits and '_', not a "
                "member the alpha-beta JSON has for another use, not ending in \"_formula\")");
}
}  // namespace

void register_line_bytes(std::string name, LineBytesFn table_bytes, LineBytesFn formula_bytes) {
  check_line_name(name);
  if (table_bytes == nullptr || formula_bytes == nullptr)
    throw Error("omgs: register_line_bytes: \"" + name + "\" needs both byte functions");
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (const LineKind* k = find_locked(r, name)) {
    if (k->table_bytes == table_bytes && k->formula_bytes == formula_bytes) return;
    throw Error("omgs: register_line_bytes: \"" + name +
                "\" is registered already with other byte functions");
  }
  std::string words = name;
  std::replace(words.begin(), words.end(), '_', ' ');
  r.kinds.push_back({name, table_bytes, formula_bytes, words, give(name), nullptr});
}

const LineKind* find_line_kind(std::string_view name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  return find_locked(r, name);
}

std::vector<const LineKind*> line_kinds() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<const LineKind*> out;
  for (const LineKind& k : r.kinds) out.push_back(&k);
  return out;
}

const LineKind& allgather_line() {
  static const LineKind* const k = find_line_kind("allgather");
  return *k;
}

double formula_alpha_s(const CollectiveFormula& f, int workers) {
  const double p = static_cast<double>(workers);
  return f.alpha_s + f.alpha_log2p_s * std::log2(p) + f.alpha_p_s * (p - 1.0);
}

std::optional<double> collective_time(const CollectiveCosts& costs, const LineKind& kind,
                                      std::uint64_t numel, int workers, double density,
                                      const LineFormat& format) {
  if (numel == 0) return 0.0;
  auto it = costs.table.find(workers);
  if (it != costs.table.end()) {
    double beta_term =
        it->second.beta_s_per_byte * kind.table_bytes(numel, workers, density, format);
    if (kind.table_scale != nullptr) beta_term = beta_term * kind.table_scale(format);
    return it->second.alpha_s + beta_term;
  }
  if (!costs.has_formula) return std::nullopt;
  return formula_alpha_s(costs.formula, workers) +
         costs.formula.beta_s_per_byte * kind.formula_bytes(numel, workers, density, format);
}

std::optional<CostIssue> check_costs(const CollectiveCosts& costs, const LineKind& kind) {
  const std::string& name = kind.name;
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

void read_costs(const JsonValue& doc, const LineKind& kind, const std::string& source,
                CollectiveCosts& costs) {
  const std::string& name = kind.name;
  if (const JsonValue* f = doc.find(name + "_formula")) {
    costs.formula = read_formula(*f, source + ": " + name + "_formula");
    costs.has_formula = true;
  }
  if (&kind == &allgather_line()) return;  // its table is read by perf_model.cpp
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

std::string costs_json(const CollectiveCosts& costs, const LineKind& kind) {
  const std::string& name = kind.name;
  std::string s;
  if (&kind != &allgather_line() && !costs.table.empty()) {
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

std::string describe_costs(const CollectiveCosts& costs, const LineKind& kind) {
  std::ostringstream os;
  const std::string& name = kind.name;
  const bool allgather = &kind == &allgather_line();
  if (!allgather)
    for (const auto& [p, ab] : costs.table)
      os << " " << name << " P=" << p << ": " << ab.alpha_s << " + " << ab.beta_s_per_byte
         << "*bytes s;";
  if (costs.has_formula) {
    const CollectiveFormula& f = costs.formula;
    if (!allgather) os << " " << name;
    os << " any P: " << f.alpha_s << " + " << f.alpha_log2p_s << "*log2(P) + " << f.alpha_p_s
       << "*(P-1) + " << f.beta_s_per_byte << "*wire_bytes s;";
  }
  return os.str();
}

}  // namespace omgs::detail
