// The exchange of each sparse group (sparse_exchange.hpp; docs/planner.md, "The third
// exchange"); the sparse allreduce's cost is the model's (model_lines.cpp).
#include "plan/sparse_exchange.hpp"

#include <algorithm>
#include <string>

#include "plan/pipeline.hpp"

namespace omgs {

namespace detail {

SparseChoice sparse_cost(const PerfModel& model, std::uint64_t numel, const PlanConfig& config) {
  const int p = config.workers;
  switch (config.sparse_exchange) {
    case SparseExchange::allgather:
      break;
    case SparseExchange::allreduce:
      return {model.sparse_allreduce_s(numel, p, config.density), Collective::sparse_allreduce};
    case SparseExchange::automatic:
      if (model.knows_sparse_allreduce(p)) {
        const double ag = model.allgather_s(numel, p, config.density);
        const double sar = model.sparse_allreduce_s(numel, p, config.density);
        if (sar < ag) return {sar, Collective::sparse_allreduce};
        return {ag, Collective::sparse};
      }
      break;
  }
  return {model.allgather_s(numel, p, config.density), Collective::sparse};
}

void check_sparse_exchange(const PerfModel& model, const PlanConfig& config) {
  if (config.sparse_exchange == SparseExchange::allreduce &&
      !model.knows_sparse_allreduce(config.workers))
    model.sparse_allreduce_s(1, config.workers, config.density);  // throws, naming P
}

void force_sparse_exchange(std::vector<Group>& groups, SparseExchange exchange) {
  if (exchange != SparseExchange::allreduce) return;
  for (Group& g : groups)
    if (g.collective == Collective::sparse) g.collective = Collective::sparse_allreduce;
}

std::vector<Group> with_sparse_exchange(const std::vector<LayerSpec>& layers,
                                        std::vector<Group> groups, const PerfModel& model,
                                        const PlanConfig& config) {
  for (Group& g : groups)
    if (g.collective != Collective::dense)
      g.collective = sparse_cost(model, group_sums(layers, g).numel, config).collective;
  return groups;
}

}  // namespace detail
}  // namespace omgs
