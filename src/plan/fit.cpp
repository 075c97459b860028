// The pure statistics of calibration (see fit.hpp).
#include "plan/fit.hpp"

#include <algorithm>

#include <omgs/error.hpp>

namespace omgs::detail {

LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y) {
  return fit_nonnegative(x, y, std::vector<double>(x.size(), 1.0));
}

LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y,
                          const std::vector<double>& w) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;  // n: the sum of the weights
  for (std::size_t i = 0; i < x.size(); ++i) {
    n += w[i];
    sx += w[i] * x[i];
    sy += w[i] * y[i];
    sxx += w[i] * x[i] * x[i];
    sxy += w[i] * x[i] * y[i];
  }
  LinearFit f;
  const double den = n * sxx - sx * sx;
  if (den > 0) {
    f.c1 = (n * sxy - sx * sy) / den;
    f.c0 = (sy - f.c1 * sx) / n;
  }
  if (f.c0 < 0 || den <= 0) {  // through the origin
    f.c0 = 0;
    f.c1 = sxx > 0 ? sxy / sxx : 0;
  }
  if (f.c1 < 0) {
    f.c1 = 0;
    f.c0 = sy / n;
  }
  return f;
}

LinearFit fit_latency_bandwidth(const std::vector<double>& x,
                                const std::vector<std::vector<double>>& samples,
                                SampleStatistic statistic) {
  std::vector<double> y, w;
  for (const std::vector<double>& s : samples) {
    y.push_back(statistic == SampleStatistic::median ? median(s) : minimum(s));
    w.push_back(y.back() > 0 ? 1.0 / (y.back() * y.back()) : 1.0);
  }
  LinearFit f = fit_nonnegative(x, y, w);
  // The largest size is the sustained rate: a line below it there was bent by a faster
  // regime of the small sizes (a shaper's burst, buffers that absorb a message), and would
  // price every larger message at that regime's rate.
  const std::size_t top =
      static_cast<std::size_t>(std::max_element(x.begin(), x.end()) - x.begin());
  if (!x.empty() && x[top] > 0 && f.c0 + f.c1 * x[top] < y[top]) f.c1 = (y[top] - f.c0) / x[top];
  return f;
}

double minimum(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<double> FittedModel::pack() const {
  std::vector<double> v = {topk.c0, topk.c1};
  for (const auto& [name, line] : lines)
    v.insert(v.end(), {line.fit.c0, line.fit.c1, static_cast<double>(line.groups)});
  return v;
}

void FittedModel::unpack(const std::vector<double>& values) {
  if (values.size() != 2 + 3 * lines.size())
    throw Error("omgs: fitted model: " + std::to_string(values.size()) +
                " values for the top-k and " + std::to_string(lines.size()) + " lines");
  topk = {values[0], values[1]};
  std::size_t i = 2;
  for (auto& [name, line] : lines) {
    line.fit = {values[i], values[i + 1]};
    line.groups = static_cast<std::size_t>(values[i + 2]);
    i += 3;
  }
}

const FittedLine* FittedModel::find(std::string_view name) const {
  const auto it = lines.find(name);
  return it == lines.end() ? nullptr : &it->second;
}

}  // namespace omgs::detail
