// omgs-plan --workers-sweep: the table and the JSON document of a sweep (sweep_output.hpp).
#include "sweep_output.hpp"

#include <cmath>
#include <cstdio>

#include "plan_text.hpp"

namespace omgs_plan {

namespace {

std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o + "\"";
}

// Full precision for the scripts that read the document (scripts/scale-study.sh).
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::size_t groups_on(const omgs::Plan& p, omgs::Collective c) {
  std::size_t n = 0;
  for (const omgs::Group& g : p.groups) n += g.collective == c;
  return n;
}

// Groups on a two-level row (allreduce_node, sparse_node): dense_groups() counts them too.
std::size_t node_groups(const omgs::Plan& p) {
  return groups_on(p, omgs::Collective::allreduce_node) +
         groups_on(p, omgs::Collective::sparse_node);
}

// The plans of a row, by name, for the per-plan objects of the JSON form.
struct Named {
  const char* name;
  const omgs::Plan* plan;
};
std::vector<Named> plans_of(const omgs::SweepRow& r) {
  std::vector<Named> v = {
      {"dense", &r.dense}, {"mgs", &r.mgs}, {"optimal", &r.optimal}, {"mixed", &r.mixed}};
  if (r.has_bf16) v.insert(v.begin() + 1, Named{"dense_bf16", &r.dense_bf16});
  if (r.has_sparse_allreduce) v.push_back(Named{"sparse_allreduce", &r.sparse_allreduce});
  if (r.has_sparse_node) v.push_back(Named{"sparse_node", &r.sparse_node});
  return v;
}

template <class F>
std::string per_plan(const omgs::SweepRow& r, const F& value) {
  std::string s = "{";
  for (const Named& n : plans_of(r))
    s += std::string(s.size() > 1 ? ", " : "") + quoted(n.name) + ": " + num(value(*n.plan));
  return s + "}";
}

}  // namespace

void print_sweep_table(std::ostream& os, const std::vector<omgs::SweepRow>& rows,
                       const SweepInputs& in) {
  os << in.model << ": density " << in.density << ", " << in.describe << "\n";
  if (!rows.empty())
    os << "backward pass " << seconds(rows[0].backward_s)
       << " s (the floor: communication hidden behind it is free)\n";
  os << "\n";
  print_table(os, rows.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"P",
              "dense_s",
              "dense_bf16_s",
              "mgs_s",
              "sar_s",
              "node_s",
              "optimal_s",
              "mixed_s",
              "mixed_vs_dense",
              "mixed_vs_bf16",
              "mixed_vs_mgs",
              "mixed_vs_sar",
              "mixed_exposed_s",
              "mixed_dense/sar/node/groups",
              "mixed_picked"};
    const omgs::SweepRow& r = rows[i - 1];
    const double mixed = r.mixed.predicted.iteration_end_s;
    const double bf16 = r.has_bf16 ? r.dense_bf16.predicted.iteration_end_s : NAN;
    const double sar = r.has_sparse_allreduce ? r.sparse_allreduce.predicted.iteration_end_s : NAN;
    const double node = r.has_sparse_node ? r.sparse_node.predicted.iteration_end_s : NAN;
    auto vs = [&](double t) { return std::isfinite(t) && mixed > 0 ? ratio(t / mixed) : "-"; };
    return {std::to_string(r.workers),
            seconds(r.dense.predicted.iteration_end_s),
            std::isfinite(bf16) ? seconds(bf16) : "-",
            seconds(r.mgs.predicted.iteration_end_s),
            std::isfinite(sar) ? seconds(sar) : "-",
            std::isfinite(node) ? seconds(node) : "-",
            seconds(r.optimal.predicted.iteration_end_s),
            seconds(mixed),
            vs(r.dense.predicted.iteration_end_s),
            vs(bf16),
            vs(r.mgs.predicted.iteration_end_s),
            vs(sar),
            seconds(r.mixed.predicted.non_overlapped_comm_s),
            std::to_string(r.mixed.dense_groups() - node_groups(r.mixed)) + "/" +
                std::to_string(groups_on(r.mixed, omgs::Collective::sparse_allreduce)) + "/" +
                std::to_string(node_groups(r.mixed)) + "/" + std::to_string(r.mixed.groups.size()),
            std::string(omgs::to_string(r.mixed.picked))};
  });
}

void print_sweep_json(std::ostream& os, const std::vector<omgs::SweepRow>& rows,
                      const SweepInputs& in) {
  os << "{\"model\": " << quoted(in.model) << ", \"perf\": " << quoted(in.perf)
     << ", \"topk\": " << (in.topk.empty() ? "null" : quoted(in.topk))
     << ", \"describe\": " << quoted(in.describe) << ",\n \"density\": " << num(in.density)
     << ", \"sweep\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const omgs::SweepRow& r = rows[i];
    os << (i ? ",\n" : "\n") << "{\"workers\": " << r.workers
       << ", \"ranks_per_node\": " << r.ranks_per_node
       << ", \"dense_s\": " << num(r.dense.predicted.iteration_end_s) << ", \"dense_bf16_s\": "
       << (r.has_bf16 ? num(r.dense_bf16.predicted.iteration_end_s) : "null")
       << ", \"mgs_s\": " << num(r.mgs.predicted.iteration_end_s) << ", \"sparse_allreduce_s\": "
       << (r.has_sparse_allreduce ? num(r.sparse_allreduce.predicted.iteration_end_s) : "null")
       << ", \"sparse_node_s\": "
       << (r.has_sparse_node ? num(r.sparse_node.predicted.iteration_end_s) : "null")
       << ", \"optimal_s\": " << num(r.optimal.predicted.iteration_end_s)
       << ", \"mixed_s\": " << num(r.mixed.predicted.iteration_end_s) << ", \"mixed_picked\": \""
       << omgs::to_string(r.mixed.picked)
       << "\", \"mixed_dense_groups\": " << r.mixed.dense_groups() - node_groups(r.mixed)
       << ", \"mixed_sparse_allreduce_groups\": "
       << groups_on(r.mixed, omgs::Collective::sparse_allreduce)
       << ", \"mixed_node_groups\": " << node_groups(r.mixed)
       << ", \"mixed_sparse_node_groups\": " << groups_on(r.mixed, omgs::Collective::sparse_node)
       << ", \"mixed_groups\": " << r.mixed.groups.size()
       << ", \"backward_s\": " << num(r.backward_s) << ",\n  \"compute_end_s\": "
       << per_plan(r, [](const omgs::Plan& p) { return p.predicted.compute_end_s; })
       << ",\n  \"exposed_comm_s\": "
       << per_plan(r, [](const omgs::Plan& p) { return p.predicted.non_overlapped_comm_s; })
       << ",\n  \"comm_total_s\": "
       << per_plan(r, [](const omgs::Plan& p) { return p.predicted.comm_total_s; }) << "}";
  }
  os << "]}\n";
}

}  // namespace omgs_plan
