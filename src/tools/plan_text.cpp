// omgs-plan's text helpers and its plan tables (plan_text.hpp).
#include "plan_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace omgs_plan {

std::string seconds(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e6 ? "%.6f" : "%.6e", v);
  return buf;
}

std::string ratio(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e9 ? "%.3f" : "%.3e", v);
  return buf;
}

std::string group_label(const std::vector<omgs::LayerSpec>& layers, const omgs::Group& g) {
  std::string s = layers[g.end - 1].name;
  if (g.end - g.begin > 1) s += " .. " + layers[g.begin].name;
  return s;
}

void print_table(std::ostream& os, std::size_t count, const std::function<Row(std::size_t)>& row) {
  std::vector<std::size_t> width;
  for (std::size_t i = 0; i < count; ++i) {
    const Row r = row(i);
    width.resize(std::max(width.size(), r.size()), 0);
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string line;
  for (std::size_t i = 0; i < count; ++i) {
    const Row r = row(i);
    line = " ";
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += ' ';
      if (c + 1 == r.size()) {
        line += r[c];
      } else {
        line += std::string(width[c] - r[c].size(), ' ') + r[c] + ' ';
      }
    }
    os << line << "\n";
  }
}

namespace {
void print_status(std::ostream& os, const omgs::Plan& plan) {
  if (plan.status != omgs::PlanStatus::complete)
    os << "  note: planner " << omgs::to_string(plan.planner) << " is "
       << omgs::to_string(plan.status) << ": " << plan.status_note << "\n";
}
}  // namespace

void print_plan_table(std::ostream& os, const omgs::Plan& plan,
                      const std::vector<omgs::LayerSpec>& layers) {
  const omgs::Timeline& t = plan.predicted;
  os << "planner " << omgs::to_string(plan.planner) << ": " << plan.groups.size() << " groups ("
     << plan.dense_groups() << " dense), predicted iteration " << seconds(t.iteration_end_s)
     << " s (compute " << seconds(t.compute_end_s) << " s, communication not hidden "
     << seconds(t.non_overlapped_comm_s) << " s)\n";
  if (plan.planner == omgs::Planner::mixed)
    os << "  picked: " << omgs::to_string(plan.picked)
       << " (the candidate choose_plan kept: near-ties to less communication, then fewer groups)\n";
  print_status(os, plan);
  print_table(os, plan.groups.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"group",      "layers",       "numel",      "collective",
              "topk_end_s", "comm_start_s", "comm_end_s", "first .. last (backward order)"};
    const std::size_t g = i - 1;
    const omgs::Group& gr = plan.groups[g];
    const omgs::GroupTiming& gt = t.groups[g];
    return {std::to_string(g),        std::to_string(gr.end - gr.begin),
            std::to_string(gr.numel), std::string(omgs::to_string(gr.collective)),
            seconds(gt.topk_end_s),   seconds(gt.comm_start_s),
            seconds(gt.comm_end_s),   group_label(layers, gr)};
  });
}

void print_comparison(std::ostream& os, const std::vector<omgs::Plan>& plans) {
  double layerwise = 0.0;
  for (const omgs::Plan& p : plans)
    if (p.planner == omgs::Planner::layerwise) layerwise = p.predicted.iteration_end_s;
  print_table(os, plans.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"planner",           "groups",       "iteration_s",          "compute_s",
              "not_hidden_comm_s", "comm_total_s", "speedup_vs_layerwise", "status"};
    const omgs::Plan& p = plans[i - 1];
    const omgs::Timeline& t = p.predicted;
    return {std::string(omgs::to_string(p.planner)),
            std::to_string(p.groups.size()),
            seconds(t.iteration_end_s),
            seconds(t.compute_end_s),
            seconds(t.non_overlapped_comm_s),
            seconds(t.comm_total_s),
            ratio(t.iteration_end_s > 0 ? layerwise / t.iteration_end_s : 1.0),
            std::string(omgs::to_string(p.status))};
  });
  for (const omgs::Plan& p : plans) print_status(os, p);
}

}  // namespace omgs_plan
