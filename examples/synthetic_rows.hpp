// omgs-train-synthetic's omgs rows: which planner, sparse exchange, pair wire and set of
// collectives each row runs with, their order (round after round), labels and options.
#pragma once

#include <string>
#include <vector>

#include <omgs/omgs.hpp>

#include "fabric_bytes.hpp"
#include "synthetic_args.hpp"

namespace omgs_synthetic {

/// One omgs row: a planner (or default_method), a sparse exchange of --sparse-exchange, a
/// pair wire of --pair-wire and an item of --collectives (each empty: the runtime's own),
/// and a round.
struct Method {
  std::string planner, exchange, wire, collectives;
  int round = 0;

  /// The row's label, planner[/exchange][/wire][/collectives][#round]; `sep` joins the parts
  /// (file names use '.'). The exchange and the collectives are named when several are
  /// compared; the round, when there are several and `with_round`.
  std::string label(const Args& args, const std::string& sep = "/", bool with_round = true) const;
};

/// The omgs rows in the order they run: round after round, each running every planner with
/// every exchange, wire and set of collectives (the default row once per round: it takes
/// none of them; the dense planner once per set of collectives), so that a drift of the
/// machine's load hits every row alike and a row's variants are side by side.
std::vector<Method> methods_in_turn(const Args& args);

/// The collectives a row of --collectives item `item` allows on `workers` ranks with sparse
/// exchange `exchange` (empty: the runtime's default): empty for "" and "flat" (the
/// runtime's own: those of the exchange, and dense); for "node" those plus the two-level rows
/// the job's `model` has a line for (sparse_node, allreduce_node); else the item's rows,
/// joined by '+'.
omgs::CollectiveSet row_collectives(const std::string& item, const std::string& exchange,
                                    int workers, const omgs::PerfModel& model);

/// The row's options: the runtime's defaults for default_method (closed loop, window
/// --refit), else its planner (+loop: closed), exchange, wire and `collectives`; the job's
/// model, density, node shape and dense allreduce form for both.
omgs::RuntimeOptions method_options(const Args& args, const Method& m, const std::string& perf,
                                    omgs::DenseAllreduce dense_form,
                                    const omgs::CollectiveSet& collectives);

/// --sparse-exchange's list, or the runtime's default exchange.
std::string exchanges_text(const Args& args);

/// The plan's groups per collective, "12 sparse, 3 sparse_node" (in id order).
std::string groups_by_collective(const omgs::Plan& plan);

/// What each --collectives item allows, the node shape and where the fabric's bytes come
/// from (rank 0 prints; the others return).
void print_collectives(const Args& args, const omgs::PerfModel& model,
                       const omgs_examples::FabricCounter& fabric, int size, int rank);

}  // namespace omgs_synthetic
