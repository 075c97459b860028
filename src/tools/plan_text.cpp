// omgs-plan's text helpers (plan_text.hpp).
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

}  // namespace omgs_plan
