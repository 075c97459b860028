// Internal: per-P tables and formulas of P for the collectives of an AlphaBetaModel
// (allgather, allreduce and sparse allreduce), their checks and their JSON form
// (docs/planner.md).
#pragma once

#include <optional>
#include <string>

#include <omgs/plan.hpp>

#include "json.hpp"

namespace omgs::detail {

enum class CollectiveKind { allgather, allreduce, sparse_allreduce };

/// "allgather", "allreduce" or "sparse_allreduce": the JSON member and the word in messages.
const char* collective_name(CollectiveKind kind);

/// Bytes the table's beta multiplies: the allgather's P * k * pair_bytes received bytes
/// (8: the 8-byte pairs; less with the compact pair format), the allreduce's
/// element_bytes * n gradient bytes (4: fp32; 2: a bf16 allreduce), the sparse allreduce's
/// wire bytes (its table and formula share one measure).
double table_bytes(CollectiveKind kind, std::uint64_t numel, int workers, double density,
                   double element_bytes = 4.0, double pair_bytes = 8.0);
/// Bytes the formula's beta multiplies (CollectiveFormula).
double wire_bytes(CollectiveKind kind, std::uint64_t numel, int workers, double density,
                  double element_bytes = 4.0, double pair_bytes = 8.0);

/// The cost for P = workers from the table entry, else the formula; nullopt if neither.
/// element_bytes: the allreduce's bytes per gradient element (ignored for the allgather);
/// pair_bytes: the allgather's bytes per pair (ignored for the allreduce).
std::optional<double> collective_time(const CollectiveCosts& costs, CollectiveKind kind,
                                      std::uint64_t numel, int workers, double density,
                                      double element_bytes = 4.0, double pair_bytes = 8.0);

/// A coefficient that is negative or not finite, or a table entry with workers < 1:
/// "<field> = <value> (must be finite and >= 0)", naming the field as the JSON does.
struct CostIssue {
  std::string field;
  std::string reason;
};
std::optional<CostIssue> check_costs(const CollectiveCosts& costs, CollectiveKind kind);

/// Reads the optional "<name>_formula" object (and for the allreduce and the sparse
/// allreduce the optional "<name>" table) of an alpha-beta document into costs. Errors name
/// source and line.
void read_costs(const JsonValue& doc, CollectiveKind kind, const std::string& source,
                CollectiveCosts& costs);

/// The JSON members of the costs that are not the allgather table (which perf_model.cpp
/// writes as before): ",\n  \"allgather_formula\": {...}" etc.; empty when there are none.
std::string costs_json(const CollectiveCosts& costs, CollectiveKind kind);

/// " allreduce P=4: a + b*bytes s; ... formula: ..." for describe().
std::string describe_costs(const CollectiveCosts& costs, CollectiveKind kind);

}  // namespace omgs::detail
