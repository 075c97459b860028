// RuntimeImpl as the closed loop's host (closed_loop.hpp's LoopHost): the narrow interface
// through which the profiler and the refit read the planning inputs in force and facts of
// the plan instance in force, replace the inputs, and change the plan (install_plan,
// plan_instance.cpp).
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

MPI_Comm RuntimeHost::comm() const {
  return r_.comm;
}

const std::vector<LayerSpec>& RuntimeHost::layers() const {
  return r_.layers;
}

const PerfModel& RuntimeHost::model() const {
  return *r_.model;
}

void RuntimeHost::set_planning_inputs(std::vector<LayerSpec> layers,
                                      std::unique_ptr<PerfModel> model) {
  r_.layers = std::move(layers);
  if (model) r_.model = std::move(model);
}

PlanConfig RuntimeHost::plan_config() const {
  return r_.plan_config();
}

Plan RuntimeHost::plan_for(Planner planner, const std::vector<LayerSpec>& layers,
                           const PerfModel& model, const OptimalBudget& budget) const {
  return make_plan(planner, layers, model, r_.plan_config(), budget);
}

double RuntimeHost::wire_pair_bytes() const {
  return r_.wire_pair_bytes();
}

const Plan& RuntimeHost::plan() const {
  return r_.instance_->plan;
}

std::uint32_t RuntimeHost::plan_generation() const {
  return r_.instance_->generation;
}

GroupIteration RuntimeHost::group_iteration(std::size_t g) const {
  const PlanInstance& p = *r_.instance_;
  return {p.topk_start_s[g],
          p.topk_end_s[g],
          p.agg_start_s[g],
          p.agg_end_s[g],
          p.engine->group_times(static_cast<int>(g)),
          p.exchanges[g]->name()};
}

void RuntimeHost::install_plan(Plan next, PlanChange change) {
  if (change == PlanChange::repredict) {
    r_.repredict_plan(std::move(next));
  } else {
    r_.install_plan(std::move(next));
  }
}

void RuntimeHost::record(TraceKind kind, int group, double t0, double t1,
                         const char* label) noexcept {
  r_.record(kind, group, t0, t1, label);
}

void RuntimeHost::set_error(std::string message) noexcept {
  r_.last_error = std::move(message);
}

}  // namespace omgs::detail
