#include <algorithm>
#include <cmath>
#include <string>

#include <omgs/plan.hpp>

#include "json.hpp"
#include "plan/collective_table.hpp"
#include "plan/pipeline.hpp"

namespace omgs {

namespace {
void check_partition(const std::vector<LayerSpec>& layers, const std::vector<Group>& groups) {
  // Plan order walks backward: groups[0] ends at L, each next group ends where the previous
  // one begins, the last begins at 0.
  std::size_t expected_end = layers.size();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& gr = groups[g];
    if (gr.end != expected_end || gr.begin >= gr.end)
      throw Error("omgs: group " + std::to_string(g) + " covers layers [" +
                  std::to_string(gr.begin) + ", " + std::to_string(gr.end) +
                  ") but the groups must partition the layers into consecutive, non-empty "
                  "ranges in backward order (the next group must end at layer " +
                  std::to_string(expected_end) + ")");
    expected_end = gr.begin;
  }
  if (expected_end != 0 || groups.empty())
    throw Error("omgs: the groups do not cover layers [0, " + std::to_string(expected_end) + ")");
}
}  // namespace

Timeline predict(const std::vector<LayerSpec>& layers, const std::vector<Group>& groups,
                 const PerfModel& model, const PlanConfig& config) {
  check_partition(layers, groups);
  Timeline t;
  t.groups.resize(groups.size());
  detail::PipelineState state;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& gr = groups[g];
    const detail::GroupSums sums = detail::group_sums(layers, gr);
    // A group whose collective has no top-k (dense) has its topk_end equal to its
    // topk_start; its exchange's time is its row's.
    const detail::CollectiveRow& row = detail::collective_row(gr.collective);
    const double ts = row.sparsifies ? model.topk_s(sums.numel) : 0.0;
    const double tc = row.time_s(model, sums.numel, config.workers, config.density);
    if (!std::isfinite(ts) || ts < 0.0 || !std::isfinite(tc) || tc < 0.0)
      throw Error("omgs: " + model.describe() + " predicts topk_s = " + std::to_string(ts) + ", " +
                  std::string(to_string(gr.collective)) + "_s = " + std::to_string(tc) +
                  " for group " + std::to_string(g) + " of " + std::to_string(sums.numel) +
                  " elements (must be finite and >= 0)");
    GroupTiming& gt = t.groups[g];
    gt = detail::pipeline_step(state, sums.backward_s, ts, tc);
    state = detail::pipeline_after(gt);
    t.comm_total_s += tc;
    if (!std::isfinite(gt.comm_end_s) || !std::isfinite(t.comm_total_s))
      throw Error("omgs: the predicted timeline overflows at group " + std::to_string(g) +
                  " (layers [" + std::to_string(gr.begin) + ", " + std::to_string(gr.end) +
                  ")): the sum of backward, top-k and allgather times is not finite");
  }
  t.compute_end_s = state.compute_end_s;
  t.iteration_end_s = state.comm_end_s;
  t.non_overlapped_comm_s = state.comm_end_s - state.compute_end_s;
  return t;
}

Plan make_plan_from_groups(Planner planner, const std::vector<LayerSpec>& layers,
                           std::vector<Group> groups, const PerfModel& model,
                           const PlanConfig& config) {
  Plan plan;
  plan.planner = planner;
  plan.picked = planner;
  for (Group& g : groups) {
    g.numel = 0;
    for (std::size_t l = g.begin; l < g.end && l < layers.size(); ++l) g.numel += layers[l].numel;
  }
  plan.predicted = predict(layers, groups, model, config);
  plan.group_of_layer.assign(layers.size(), 0);
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t l = groups[g].begin; l < groups[g].end; ++l) plan.group_of_layer[l] = g;
  plan.groups = std::move(groups);
  return plan;
}

std::string plan_to_json(const Plan& plan, const std::vector<LayerSpec>& layers,
                         const PlanConfig& config) {
  using detail::json_number;
  using detail::json_quote;
  std::string s = "{\"planner\": " + json_quote(to_string(plan.planner)) +
                  ", \"workers\": " + std::to_string(config.workers) +
                  ", \"density\": " + json_number(config.density) +
                  ", \"layers\": " + std::to_string(layers.size()) +
                  ", \"num_groups\": " + std::to_string(plan.groups.size()) +
                  ", \"status\": " + json_quote(to_string(plan.status)) +
                  ", \"gap_bound_s\": " + json_number(plan.gap_bound_s) +
                  ", \"status_note\": " + json_quote(plan.status_note) + ",\n \"groups\": [";
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    s += g == 0 ? "\n  [" : ",\n  [";
    const Group& gr = plan.groups[g];
    for (std::size_t l = gr.end; l-- > gr.begin;) {
      s += json_quote(layers[l].name);
      if (l != gr.begin) s += ", ";
    }
    s += "]";
  }
  s += "],\n \"group_numel\": [";
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    s += (g ? ", " : "") + std::to_string(plan.groups[g].numel);
  s += "],\n \"picked\": " + json_quote(to_string(plan.picked)) + ", \"collectives\": [";
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    s += (g ? ", " : "") + json_quote(to_string(plan.groups[g].collective));
  const Timeline& t = plan.predicted;
  s += "],\n \"predicted\": {\"iteration_end_s\": " + json_number(t.iteration_end_s) +
       ", \"compute_end_s\": " + json_number(t.compute_end_s) +
       ", \"non_overlapped_comm_s\": " + json_number(t.non_overlapped_comm_s) +
       ", \"comm_total_s\": " + json_number(t.comm_total_s) + "},\n \"timeline\": [";
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    const GroupTiming& gt = t.groups[g];
    s += g == 0 ? "\n  " : ",\n  ";
    s += "{\"backward_start_s\": " + json_number(gt.backward_start_s) +
         ", \"topk_start_s\": " + json_number(gt.topk_start_s) +
         ", \"topk_end_s\": " + json_number(gt.topk_end_s) +
         ", \"comm_start_s\": " + json_number(gt.comm_start_s) +
         ", \"comm_end_s\": " + json_number(gt.comm_end_s) + "}";
  }
  s += "]}\n";
  return s;
}

}  // namespace omgs
