#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <omgs/plan.hpp>

#include "collective_costs.hpp"
#include "json.hpp"

namespace omgs {

// ---------------------------------------------------------------------------------------
// ReferenceModel: the original code's constants. Expressions are written in the order of
// the original Python so that the doubles (and hence the MGS decisions) are identical.
// ---------------------------------------------------------------------------------------

namespace {
struct RefEntry {
  int workers;
  AlphaBeta small;  // messages < 1 MiB
  AlphaBeta large;
};
constexpr RefEntry reference_table[] = {
    {2, {1.6e-3, 1.0e-8}, {4.4e-3, 5.8e-9}},
    {4, {2.7e-3, 1.3e-8}, {5.6e-3, 7.4e-9}},
    {8, {4.0e-3, 1.5e-8}, {7.68e-3, 8.2e-9}},
    {16, {1.7e-3, 1.7e-8}, {2.1e-3, 1.7e-8}},
};
const RefEntry* find_reference(int workers) {
  for (const RefEntry& e : reference_table)
    if (e.workers == workers) return &e;
  return nullptr;
}
}  // namespace

double ReferenceModel::topk_s(std::uint64_t numel) const {
  if (numel == 0) return 0.0;
  const double x = static_cast<double>(numel);
  return 2.18896957e-10 * x * std::log2(x);
}

double ReferenceModel::allgather_s(std::uint64_t numel, int workers, double density) const {
  if (numel == 0) return 0.0;
  const RefEntry* e = find_reference(workers);
  if (e == nullptr) check_workers(workers);  // throws
  // size = x * P * 4 * d: the integer product first, then the density, as in Python.
  const double size =
      static_cast<double>(numel * static_cast<std::uint64_t>(workers) * 4u) * density;
  const AlphaBeta& ab = size < 1024.0 * 1024.0 ? e->small : e->large;
  return (ab.alpha_s + ab.beta_s_per_byte * size) * 2;
}

void ReferenceModel::check_workers(int workers) const {
  if (find_reference(workers) == nullptr)
    throw Error(
        "omgs: the reference performance model knows only P = 2, 4, 8 or 16 workers "
        "(the cluster of the original OMGS-SGD code), not P = " +
        std::to_string(workers) + "; calibrate or give an alpha-beta JSON model");
}

bool ReferenceModel::knows_collective(std::string_view name, int workers) const {
  return name == "allgather" && find_reference(workers) != nullptr;
}

std::string ReferenceModel::describe() const {
  return "reference (OMGS-SGD paper constants: topk 2.18896957e-10*n*log2(n) s, "
         "allgather alpha-beta tables for P in {2,4,8,16})";
}

// ---------------------------------------------------------------------------------------
// AlphaBetaModel
// ---------------------------------------------------------------------------------------

namespace {
// A coefficient of an alpha-beta model that is negative, not finite, or so large that the
// model's prediction for the largest valid group (max_total_numel elements, density 1)
// overflows. `field` names it as the JSON document does.
struct CoefficientIssue {
  std::string field;
  std::string reason;
};

std::string show(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::optional<CoefficientIssue> check_coefficients(TopkForm form, double c0, double c1,
                                                   const std::map<int, AlphaBeta>& allgather) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0.0; };
  const std::string finite = " (must be finite and >= 0)";
  if (bad(c0)) return CoefficientIssue{"topk c0_s", " = " + show(c0) + finite};
  if (bad(c1)) return CoefficientIssue{"topk c1_s", " = " + show(c1) + finite};
  const double n = static_cast<double>(max_total_numel);
  const double f = form == TopkForm::linear ? n : n * std::log2(n);
  const std::string overflow = " makes the predicted time of a group of 2^53 elements overflow";
  if (!std::isfinite(c0 + c1 * f))
    return CoefficientIssue{"topk c1_s", " = " + show(c1) + overflow};
  for (const auto& [p, ab] : allgather) {
    const std::string entry = "allgather entry for workers " + std::to_string(p) + ": ";
    if (p < 1)
      return CoefficientIssue{"allgather entry for workers " + std::to_string(p),
                              " (workers must be >= 1)"};
    if (bad(ab.alpha_s))
      return CoefficientIssue{entry + "alpha_s", " = " + show(ab.alpha_s) + finite};
    if (bad(ab.beta_s_per_byte))
      return CoefficientIssue{entry + "beta_s_per_byte", " = " + show(ab.beta_s_per_byte) + finite};
    const double bytes = AlphaBetaModel::bytes_received(max_total_numel, p, 1.0);
    if (!std::isfinite(ab.alpha_s + ab.beta_s_per_byte * bytes))
      return CoefficientIssue{entry + "beta_s_per_byte",
                              " = " + show(ab.beta_s_per_byte) + overflow};
  }
  return std::nullopt;
}
}  // namespace

AlphaBetaModel::AlphaBetaModel(TopkForm form, double c0_s, double c1_s,
                               std::map<int, AlphaBeta> allgather)
    : AlphaBetaModel(form, c0_s, c1_s, CollectiveCosts{std::move(allgather), false, {}},
                     CollectiveCosts{}) {}

AlphaBetaModel::AlphaBetaModel(TopkForm form, double c0_s, double c1_s, CollectiveCosts allgather,
                               CollectiveCosts allreduce)
    : form_(form), c0_s_(c0_s), c1_s_(c1_s) {
  lines_["allgather"] = std::move(allgather);
  if (!allreduce.empty()) lines_["allreduce"] = std::move(allreduce);
  check_and_derive();
}

void AlphaBetaModel::check_and_derive() {
  const CollectiveCosts& allgather = allgather_costs();
  if (allgather.empty()) throw Error("omgs: alpha-beta model: the allgather table is empty");
  if (auto issue = check_coefficients(form_, c0_s_, c1_s_, allgather.table))
    throw Error("omgs: alpha-beta model: " + issue->field + issue->reason);
  for (const detail::LineKind* kind : detail::line_kinds())
    if (const CollectiveCosts* costs = line(kind->name))
      if (auto issue = detail::check_costs(*costs, *kind))
        throw Error("omgs: alpha-beta model: " + issue->field + issue->reason);
  derive();
}

double AlphaBetaModel::bytes_received(std::uint64_t numel, int workers, double density) {
  constexpr double pair_bytes = 8.0;  // uint32 index + float value
  return static_cast<double>(workers) * static_cast<double>(selected_count(numel, density)) *
         pair_bytes;
}

double AlphaBetaModel::topk_s(std::uint64_t numel) const {
  if (numel == 0) return 0.0;
  const double n = static_cast<double>(numel);
  const double f = form_ == TopkForm::linear ? n : n * std::log2(n);
  return c0_s_ + c1_s_ * f;
}

void AlphaBetaModel::check_workers(int workers) const {
  if (allgather_costs().knows(workers)) return;
  std::string known;
  for (const auto& [p, ab] : allgather_table())
    known += (known.empty() ? "" : ", ") + std::to_string(p);
  throw Error("omgs: the alpha-beta model has no allgather entry for P = " +
              std::to_string(workers) + " workers (it has: " + known + ")");
}

std::string AlphaBetaModel::describe() const {
  std::ostringstream os;
  os << "alpha-beta (topk " << c0_s_ << " + " << c1_s_
     << (form_ == TopkForm::linear ? "*n" : "*n*log2(n)") << " s; allgather";
  for (const auto& [p, ab] : allgather_table())
    os << " P=" << p << ": " << ab.alpha_s << " + " << ab.beta_s_per_byte << "*bytes s;";
  for (const detail::LineKind* kind : detail::line_kinds())
    if (const CollectiveCosts* costs = line(kind->name))
      os << detail::describe_costs(*costs, *kind);
  if (allreduce_element_bytes_ != 4.0)
    os << " allreduce of " << allreduce_element_bytes_ << " bytes per element;";
  os << ")";
  return os.str();
}

namespace {
using detail::JsonValue;

const JsonValue& member(const JsonValue& obj, std::string_view key, JsonValue::Kind kind,
                        const std::string& where) {
  const JsonValue* v = obj.find(key);
  if (v == nullptr) throw Error(where + ": missing member \"" + std::string(key) + "\"");
  if (!v->is(kind))
    throw Error(where + ": member \"" + std::string(key) + "\" must be a " +
                detail::json_kind_name(kind) + ", not a " + detail::json_kind_name(v->kind()));
  return *v;
}

// The "topk" member; line_of gets the coefficients' lines for the coefficient check.
TopkCost read_topk(const JsonValue& doc, const std::string& source,
                   std::map<std::string, std::size_t>& line_of) {
  const JsonValue& topk = member(doc, "topk", JsonValue::Kind::object, source);
  const std::string where_topk = source + ": topk";
  const std::string& form_name = member(topk, "form", JsonValue::Kind::string, where_topk).string();
  TopkCost cost;
  if (form_name == "linear")
    cost.form = TopkForm::linear;
  else if (form_name == "nlogn")
    cost.form = TopkForm::nlogn;
  else
    throw Error(where_topk + ": \"form\" is \"" + form_name +
                "\", expected \"linear\" or \"nlogn\"");
  const JsonValue& c0v = member(topk, "c0_s", JsonValue::Kind::number, where_topk);
  const JsonValue& c1v = member(topk, "c1_s", JsonValue::Kind::number, where_topk);
  line_of["topk c0_s"] = c0v.line();
  line_of["topk c1_s"] = c1v.line();
  cost.c0_s = c0v.number();
  cost.c1_s = c1v.number();
  return cost;
}

// The optional "allreduce_element_bytes" (default 4).
double read_element_bytes(const JsonValue& doc, const std::string& source) {
  const JsonValue* v = doc.find("allreduce_element_bytes");
  if (v == nullptr) return 4.0;
  if (!v->is(JsonValue::Kind::number) || !(v->number() > 0.0 && v->number() <= 8.0))
    throw Error(source + ":" + std::to_string(v->line()) +
                ": allreduce_element_bytes must be a number in (0, 8]");
  return v->number();
}
}  // namespace

AlphaBetaModel AlphaBetaModel::from_json(std::string_view text, const std::string& source) {
  const JsonValue doc = detail::parse_json(text, source);
  if (!doc.is(JsonValue::Kind::object)) throw Error(source + ": the document must be an object");
  const std::string& type = member(doc, "type", JsonValue::Kind::string, source).string();
  if (type != "alpha_beta")
    throw Error(source + ": \"type\" is \"" + type + "\", expected \"alpha_beta\"");
  std::map<std::string, std::size_t> line_of;  // field -> line, for the coefficient check
  const TopkCost topk = read_topk(doc, source, line_of);
  const TopkForm form = topk.form;

  std::map<int, AlphaBeta> table;
  const JsonValue& ag = member(doc, "allgather", JsonValue::Kind::array, source);
  for (std::size_t i = 0; i < ag.array().size(); ++i) {
    const std::string where = source + ": allgather[" + std::to_string(i) + "]";
    const JsonValue& e = ag.array()[i];
    if (!e.is(JsonValue::Kind::object)) throw Error(where + " must be an object");
    const double p = member(e, "workers", JsonValue::Kind::number, where).number();
    if (p != std::floor(p) || p < 1 || p > 1e9)
      throw Error(where + ": \"workers\" must be a positive integer");
    AlphaBeta ab;
    const JsonValue& alpha = member(e, "alpha_s", JsonValue::Kind::number, where);
    const JsonValue& beta = member(e, "beta_s_per_byte", JsonValue::Kind::number, where);
    ab.alpha_s = alpha.number();
    ab.beta_s_per_byte = beta.number();
    const std::string entry = "allgather entry for workers " + std::to_string(int(p)) + ": ";
    line_of[entry + "alpha_s"] = alpha.line();
    line_of[entry + "beta_s_per_byte"] = beta.line();
    if (!table.emplace(static_cast<int>(p), ab).second)
      throw Error(where + ": a second entry for workers = " + std::to_string(static_cast<int>(p)));
  }
  if (auto issue = check_coefficients(form, topk.c0_s, topk.c1_s, table))
    throw Error(source + ":" + std::to_string(line_of[issue->field]) + ": " + issue->field +
                issue->reason);
  // Every registered collective's members, the allgather's table first (read above).
  std::vector<std::pair<std::string, CollectiveCosts>> lines;
  for (const detail::LineKind* kind : detail::line_kinds()) {
    CollectiveCosts costs;
    if (kind == &detail::allgather_line()) costs.table = std::move(table);
    detail::read_costs(doc, *kind, source, costs);
    lines.emplace_back(kind->name, std::move(costs));
  }
  const double element_bytes = read_element_bytes(doc, source);
  try {
    AlphaBetaModel m(form, topk.c0_s, topk.c1_s, std::move(lines[0].second), CollectiveCosts{});
    m = m.with_allreduce_element_bytes(element_bytes);
    for (std::size_t i = 1; i < lines.size(); ++i)
      if (!lines[i].second.empty()) m = m.with_line(lines[i].first, std::move(lines[i].second));
    return m;
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
}

AlphaBetaModel AlphaBetaModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("omgs: cannot open the performance model file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path);
}

std::string AlphaBetaModel::to_json() const {
  using detail::json_number;
  std::string s = "{\n  \"type\": \"alpha_beta\",\n  \"topk\": {\"form\": \"";
  s += form_ == TopkForm::linear ? "linear" : "nlogn";
  s += "\", \"c0_s\": " + json_number(c0_s_) + ", \"c1_s\": " + json_number(c1_s_) + "},\n";
  s += "  \"allgather\": [";
  bool first = true;
  for (const auto& [p, ab] : allgather_table()) {
    s += first ? "\n" : ",\n";
    first = false;
    s += "    {\"workers\": " + std::to_string(p) + ", \"alpha_s\": " + json_number(ab.alpha_s) +
         ", \"beta_s_per_byte\": " + json_number(ab.beta_s_per_byte) + "}";
  }
  s += "\n  ]";
  for (const detail::LineKind* kind : detail::line_kinds())
    if (const CollectiveCosts* costs = line(kind->name)) s += detail::costs_json(*costs, *kind);
  if (allreduce_element_bytes_ != 4.0)
    s += ",\n  \"allreduce_element_bytes\": " + json_number(allreduce_element_bytes_);
  s += "\n}\n";
  return s;
}

void AlphaBetaModel::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("omgs: cannot write the performance model file '" + path + "'");
  out << to_json();
  if (!out) throw Error("omgs: writing the performance model file '" + path + "' failed");
}

AlphaBetaModel AlphaBetaModel::with_topk(const TopkCost& topk) const {
  AlphaBetaModel m = *this;
  m.form_ = topk.form;
  m.c0_s_ = topk.c0_s;
  m.c1_s_ = topk.c1_s;
  m.check_and_derive();
  return m;
}

AlphaBetaModel AlphaBetaModel::with_allreduce_element_bytes(double bytes) const {
  if (!(bytes > 0.0 && bytes <= 8.0))
    throw Error("omgs: alpha-beta model: allreduce element bytes = " + show(bytes) +
                " (must be in (0, 8])");
  AlphaBetaModel m = *this;
  m.allreduce_element_bytes_ = bytes;
  return m;
}

AlphaBetaModel AlphaBetaModel::with_pair_bytes(double bytes) const {
  if (!(bytes > 0.0 && bytes <= 64.0))
    throw Error("omgs: alpha-beta model: bytes per pair = " + show(bytes) +
                " (must be in (0, 64])");
  AlphaBetaModel m = *this;
  m.pair_bytes_ = bytes;
  return m;
}

TopkCost load_topk_cost(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("omgs: cannot open the top-k model file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  const JsonValue doc = detail::parse_json(ss.str(), path);
  if (!doc.is(JsonValue::Kind::object)) throw Error(path + ": the document must be an object");
  const std::string& type = member(doc, "type", JsonValue::Kind::string, path).string();
  if (type != "alpha_beta" && type != "topk")
    throw Error(path + ": \"type\" is \"" + type + "\", expected \"topk\" or \"alpha_beta\"");
  std::map<std::string, std::size_t> line_of;
  const TopkCost topk = read_topk(doc, path, line_of);
  if (auto issue = check_coefficients(topk.form, topk.c0_s, topk.c1_s, {}))
    throw Error(path + ":" + std::to_string(line_of[issue->field]) + ": " + issue->field +
                issue->reason);
  return topk;
}

std::unique_ptr<PerfModel> make_perf_model(const std::string& spec) {
  if (spec == "reference") return std::make_unique<ReferenceModel>();
  if (spec.empty()) throw Error("omgs: empty performance model (use 'reference' or a JSON file)");
  return std::make_unique<AlphaBetaModel>(AlphaBetaModel::load(spec));
}

}  // namespace omgs
