// The performance model fitted to measured timelines (see timeline_fit.hpp).
#include "plan/timeline_fit.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "plan/collective_costs.hpp"
#include "plan/collective_table.hpp"

namespace omgs::detail {

GroupCosts group_costs(const Timeline& t, std::size_t g) {
  const GroupTiming& gt = t.groups[g];
  GroupCosts c;
  c.backward_s = std::max(0.0, gt.topk_start_s - gt.backward_start_s);
  c.sparsify_s = std::max(0.0, gt.topk_end_s - gt.topk_start_s);
  const double start =
      g == 0 ? gt.comm_start_s : std::max(gt.comm_start_s, t.groups[g - 1].comm_end_s);
  c.allgather_s = std::max(0.0, gt.comm_end_s - start);
  return c;
}

namespace {

/// y ~ c0 + c1 x, each point weighted 1 / max(y, mean y)^2: relative error for the points
/// above the mean cost, absolute error (at the mean's scale) below it. Plain relative
/// weights let a near-zero point decide the line: an allgather that completed behind the
/// previous one is charged ~10 us, and VGG-16 on 4 hosts at 1 Gbit/s fitted an allgather
/// beta of 0 and a top-k line 40% below its 130M-element group, so the plan in force was
/// predicted 26% fast. With one distinct x: the slope through the prior's intercept
/// (capped at the smallest y).
LinearFit fit_costs(const std::vector<double>& x, const std::vector<double>& y, std::size_t sizes,
                    double prior_c0) {
  if (sizes >= 2) {
    double mean = 0;
    for (double v : y) mean += v / static_cast<double>(y.size());
    std::vector<double> w(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double scale = std::max(y[i], mean);
      w[i] = scale > 0 ? 1.0 / (scale * scale) : 1.0;
    }
    return fit_nonnegative(x, y, w);
  }
  LinearFit f;
  f.c0 = std::max(0.0, std::min(prior_c0, minimum(y)));
  double slope = 0;
  for (std::size_t i = 0; i < x.size(); ++i) slope += x[i] > 0 ? (y[i] - f.c0) / x[i] : 0.0;
  f.c1 = std::max(0.0, slope / static_cast<double>(x.size()));
  return f;
}

}  // namespace

GroupPoints group_medians(std::size_t groups, const Timeline* timelines, std::size_t count) {
  GroupPoints p;
  std::vector<double> sparsify(count), allgather(count);
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t i = 0; i < count; ++i) {
      const GroupCosts c = group_costs(timelines[i], g);
      sparsify[i] = c.sparsify_s;
      allgather[i] = c.allgather_s;
    }
    p.sparsify_s.push_back(median(sparsify));
    p.allgather_s.push_back(median(allgather));
  }
  return p;
}

const char* fit_line(const Group& g, int workers, double density, const LineFormat& format,
                     double& x) {
  const CollectiveRow& row = collective_row(g.collective);
  if (row.sparsifies && row.fit_bytes) {
    x = row.fit_bytes(g.numel, workers, density, format.pair_bytes);
    return row.line.c_str();  // rows never move
  }
  const LineKind* kind = find_line_kind(row.line);
  if (kind == nullptr) return nullptr;
  x = kind->table_bytes(g.numel, workers, density, format);
  return row.line.c_str();
}

LinearFit TimelineFit::line(std::string_view name) const {
  const auto it = lines.find(name);
  return it == lines.end() ? LinearFit{} : it->second.fit;
}

std::size_t TimelineFit::groups(std::string_view name) const {
  const auto it = lines.find(name);
  return it == lines.end() ? 0 : it->second.groups;
}

TimelineFit fit_points(const std::vector<Group>& groups, const GroupPoints& points, int workers,
                       double density, const FittedModel& prior, const LineFormat& format) {
  // Every group's exchange is a point of its line; only the sparse groups' are points of the
  // top-k (a dense group has none).
  struct Points {
    std::vector<double> bytes, seconds;
    std::set<std::uint64_t> sizes;
  };
  std::map<std::string, Points, std::less<>> by_line;
  std::vector<double> n, sparsify;
  std::set<std::uint64_t> distinct;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const Group& g = groups[i];
    double x = 0.0;
    const char* name = fit_line(g, workers, density, format, x);
    if (name == nullptr) continue;
    Points& p = by_line[name];
    p.bytes.push_back(x);
    p.seconds.push_back(points.allgather_s[i]);
    p.sizes.insert(g.numel);
    if (!collective_row(g.collective).sparsifies) continue;
    n.push_back(static_cast<double>(g.numel));
    sparsify.push_back(points.sparsify_s[i]);
    distinct.insert(g.numel);
  }
  TimelineFit f;
  f.sizes = distinct.size();
  f.intercepts_fitted = f.sizes >= 2;
  // Without points (an all-dense plan, or no group of one exchange) the prior stays.
  f.topk = n.empty() ? prior.topk : fit_costs(n, sparsify, f.sizes, prior.topk.c0);
  for (const auto& [name, line] : prior.lines) f.lines[name] = {line.fit, 0};
  for (const auto& [name, p] : by_line) {
    const FittedLine* had = prior.find(name);
    const double c0 = had == nullptr ? 0.0 : had->fit.c0;
    f.lines[name] = {fit_costs(p.bytes, p.seconds, p.sizes.size(), c0), p.seconds.size()};
  }
  return f;
}

TimelineFit fit_timelines(const std::vector<Group>& groups, const Timeline* timelines,
                          std::size_t count, int workers, double density,
                          const FittedModel& prior) {
  return fit_points(groups, group_medians(groups.size(), timelines, count), workers, density, prior,
                    LineFormat{});
}

}  // namespace omgs::detail
