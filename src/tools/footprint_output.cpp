// omgs-plan --footprint (footprint_output.hpp).
#include "footprint_output.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "plan_text.hpp"

namespace omgs_plan {

namespace {

struct Footprint {
  double total = 0.0;
  double largest = 0.0;
};

Footprint footprint(const omgs::Plan& plan, int workers, double density) {
  const std::vector<double> per = omgs::group_memory_bytes(plan, workers, density);
  Footprint f;
  f.total = std::accumulate(per.begin(), per.end(), 0.0);
  if (!per.empty()) f.largest = *std::max_element(per.begin(), per.end());
  return f;
}

}  // namespace

std::string bytes(double v) {
  char buf[64];
  if (std::fabs(v) < 1e18)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.6e", v);
  return buf;
}

void print_plan_footprint(std::ostream& os, const omgs::Plan& plan,
                          const std::vector<omgs::LayerSpec>& layers, int workers, double density) {
  const std::vector<double> per = omgs::group_memory_bytes(plan, workers, density);
  os << "\nfootprint: bytes per rank each group's exchange allocates (P = " << workers << ")\n";
  print_table(os, plan.groups.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"group", "collective", "numel", "memory_bytes", "first .. last (backward order)"};
    const omgs::Group& g = plan.groups[i - 1];
    return {std::to_string(i - 1), std::string(omgs::to_string(g.collective)),
            std::to_string(g.numel), bytes(per[i - 1]), group_label(layers, g)};
  });
  const Footprint f = footprint(plan, workers, density);
  os << "plan " << omgs::to_string(plan.planner) << ": " << bytes(f.total)
     << " bytes per rank (all groups), largest group " << bytes(f.largest) << " bytes\n";
}

void print_plans_footprint(std::ostream& os, const std::vector<omgs::Plan>& plans, int workers,
                           double density) {
  os << "\nfootprint: bytes per rank the groups' exchanges allocate (P = " << workers << ")\n";
  print_table(os, plans.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0) return {"planner", "groups", "plan_bytes", "largest_group_bytes"};
    const omgs::Plan& p = plans[i - 1];
    const Footprint f = footprint(p, workers, density);
    return {std::string(omgs::to_string(p.planner)), std::to_string(p.groups.size()),
            bytes(f.total), bytes(f.largest)};
  });
}

void print_sweep_footprint(std::ostream& os, const std::vector<omgs::SweepRow>& rows,
                           double density) {
  os << "\nfootprint: bytes per rank each plan's exchanges allocate (all groups)\n";
  print_table(os, rows.size() + 1, [&](std::size_t i) -> Row {
    if (i == 0)
      return {"P",
              "dense_bytes",
              "mgs_bytes",
              "sar_bytes",
              "optimal_bytes",
              "mixed_bytes",
              "mixed_largest_group_bytes"};
    const omgs::SweepRow& r = rows[i - 1];
    const int p = r.workers;
    const Footprint mixed = footprint(r.mixed, p, density);
    return {std::to_string(p),
            bytes(footprint(r.dense, p, density).total),
            bytes(footprint(r.mgs, p, density).total),
            r.has_sparse_allreduce ? bytes(footprint(r.sparse_allreduce, p, density).total) : "-",
            bytes(footprint(r.optimal, p, density).total),
            bytes(mixed.total),
            bytes(mixed.largest)};
  });
}

}  // namespace omgs_plan
