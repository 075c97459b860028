// omgs-plan's text helpers, shared by its plan and sweep outputs.
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <omgs/plan.hpp>

namespace omgs_plan {

/// Seconds as fixed-point with 6 decimals; scientific from 1e6 s on, so that huge but
/// finite times stay short.
std::string seconds(double v);
/// A ratio with 3 decimals (scientific from 1e9 on).
std::string ratio(double v);

/// A group's layers, "last .. first" (backward order).
std::string group_label(const std::vector<omgs::LayerSpec>& layers, const omgs::Group& g);

using Row = std::vector<std::string>;

/// Prints `count` rows (row(0) is the header) with every column as wide as its widest
/// cell: numbers right-aligned, the last column (names) left-aligned and not padded. Two
/// passes over row(i), so that a plan of a million groups is not held as text.
void print_table(std::ostream& os, std::size_t count, const std::function<Row(std::size_t)>& row);

/// One plan's groups (collective, predicted times, layers), and its status note if any.
void print_plan_table(std::ostream& os, const omgs::Plan& plan,
                      const std::vector<omgs::LayerSpec>& layers);
/// Several planners' plans side by side (speedup against the layer-wise one).
void print_comparison(std::ostream& os, const std::vector<omgs::Plan>& plans);

}  // namespace omgs_plan
