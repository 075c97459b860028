// omgs-plan --footprint: the bytes per rank each group's exchange allocates (its row's
// memory_bytes, omgs::group_memory_bytes) and the plan's sum, for one plan, several plans, or
// a sweep (one line per P).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <omgs/plan.hpp>
#include <omgs/sweep.hpp>

namespace omgs_plan {

/// Bytes as an integer (scientific from 1e18 on).
std::string bytes(double v);
/// Every group's bytes per rank (group, collective, numel, memory_bytes, layers), then the
/// plan's sum and its largest group.
void print_plan_footprint(std::ostream& os, const omgs::Plan& plan,
                          const std::vector<omgs::LayerSpec>& layers, int workers, double density);
/// One line per plan: its sum and its largest group.
void print_plans_footprint(std::ostream& os, const std::vector<omgs::Plan>& plans, int workers,
                           double density);
/// One line per P: the sum of each plan of the sweep, and mixed's largest group.
void print_sweep_footprint(std::ostream& os, const std::vector<omgs::SweepRow>& rows,
                           double density);

}  // namespace omgs_plan
