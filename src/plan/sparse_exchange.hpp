// Internal: the exchange of a sparse group (allgather or sparse allreduce) as
// PlanConfig::sparse_exchange asks and the model predicts. Every planner (MGS, the collective
// chooser, the optimal search, the exhaustive oracle) takes a sparse group's communication
// time from here, so they agree with predict() to the last bit (docs/planner.md, "The third
// exchange").
#pragma once

#include <cstdint>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs::detail {

/// A sparse group's exchange and its predicted time.
struct SparseChoice {
  double comm_s = 0.0;
  Collective collective = Collective::sparse;
};

/// allgather: the allgather; allreduce: the sparse allreduce (the model must know it);
/// automatic: the faster of the two where the model knows the sparse allreduce (a tie keeps
/// the allgather), else the allgather. The top-k before either is the same, and the
/// pipeline's times are monotone in a group's communication time, so taking the faster one
/// per group is exact for every grouping.
SparseChoice sparse_cost(const PerfModel& model, std::uint64_t numel, const PlanConfig& config);

/// Throws omgs::Error if config asks for the sparse allreduce (SparseExchange::allreduce)
/// and the model cannot predict it for config.workers.
void check_sparse_exchange(const PerfModel& model, const PlanConfig& config);

/// SparseExchange::allreduce: every allgather group becomes a sparse allreduce (for plans
/// made without the option, e.g. the runtime's layer-wise plan while profiling); allgather
/// and automatic leave the groups as they are (automatic: the planner chose per group).
void force_sparse_exchange(std::vector<Group>& groups, SparseExchange exchange);

/// The groups with every non-dense group's collective set by sparse_cost.
std::vector<Group> with_sparse_exchange(const std::vector<LayerSpec>& layers,
                                        std::vector<Group> groups, const PerfModel& model,
                                        const PlanConfig& config);

}  // namespace omgs::detail
