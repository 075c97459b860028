// Internal: the lines of an AlphaBetaModel by collective name (per-P tables and formulas of
// P), the bytes each line's beta multiplies, their checks and their JSON form
// (docs/planner.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/plan.hpp>

#include "json.hpp"

namespace omgs::detail {

/// The format in force, which some lines' bytes depend on: the dense allreduce's bytes per
/// gradient element (4: fp32; 2: a bf16 allreduce) and the sparse exchanges' bytes per
/// pair (8: the 8-byte pairs; less with the compact pair format).
struct LineFormat {
  double element_bytes = 4.0;
  double pair_bytes = 8.0;
};

/// Bytes a line's beta multiplies for a group of numel elements, k = density * numel
/// selected per rank, among `workers` ranks.
using LineBytesFn = double (*)(std::uint64_t numel, int workers, double density,
                               const LineFormat& format);

/// A collective a model may have a line for: its name (the JSON members "<name>" and
/// "<name>_formula"), the bytes its table's and its formula's beta multiply, and the words
/// of its error messages.
struct LineKind {
  std::string name;
  LineBytesFn table_bytes = nullptr;
  LineBytesFn formula_bytes = nullptr;
  std::string words;  ///< "dense allreduce": what the collective is called in messages
  std::string hint;   ///< how a model gets the line, for the message of a missing one
  /// The allgather's only: its table's bytes are the 8-byte pairs' and the table's beta
  /// term is scaled by the format's pair_bytes / 8 (the order of the products the plans
  /// have always been computed with); nullptr: no scale.
  double (*table_scale)(const LineFormat& format) = nullptr;
};

/// Adds a collective that models may have a line for, after the built-in allgather,
/// allreduce and sparse_allreduce (the order of to_json and of describe()). The name is
/// lowercase letters, digits and '_', not "type", "topk", "allreduce_element_bytes" nor
/// ending in "_formula". Registering a name again with the same functions does nothing;
/// with others, or a bad name or a null function, throws omgs::Error. Thread-safe.
OMGS_EXPORT void register_line_bytes(std::string name, LineBytesFn table_bytes,
                                     LineBytesFn formula_bytes);

/// The registered collective of that name, nullptr if none. The pointer stays valid.
OMGS_EXPORT const LineKind* find_line_kind(std::string_view name);

/// The registered collectives, built-ins first, in registration order.
std::vector<const LineKind*> line_kinds();

/// The built-in collective "allgather": the line every model has (its table is the JSON
/// member every alpha-beta document has).
const LineKind& allgather_line();

/// A formula's latency at P = workers: alpha_s + alpha_log2p_s log2 P + alpha_p_s (P - 1).
double formula_alpha_s(const CollectiveFormula& f, int workers);

/// The cost for P = workers from the table entry, else the formula; nullopt if neither.
/// 0 for numel == 0.
std::optional<double> collective_time(const CollectiveCosts& costs, const LineKind& kind,
                                      std::uint64_t numel, int workers, double density,
                                      const LineFormat& format);

/// A coefficient that is negative or not finite, or a table entry with workers < 1:
/// "<field> = <value> (must be finite and >= 0)", naming the field as the JSON does.
struct CostIssue {
  std::string field;
  std::string reason;
};
std::optional<CostIssue> check_costs(const CollectiveCosts& costs, const LineKind& kind);

/// Reads the optional "<name>_formula" object (and, but for the allgather, the optional
/// "<name>" table) of an alpha-beta document into costs. Errors name source and line.
void read_costs(const JsonValue& doc, const LineKind& kind, const std::string& source,
                CollectiveCosts& costs);

/// The JSON members of the costs that are not the allgather table (which perf_model.cpp
/// writes): ",\n  \"allgather_formula\": {...}" etc.; empty when there are none.
std::string costs_json(const CollectiveCosts& costs, const LineKind& kind);

/// " allreduce P=4: a + b*bytes s; ... formula: ..." for describe().
std::string describe_costs(const CollectiveCosts& costs, const LineKind& kind);

}  // namespace omgs::detail
