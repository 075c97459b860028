// Internal: the pure statistics of calibration (no MPI, no Kokkos; tests/plan/test_fit.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <omgs/export.hpp>

namespace omgs::detail {

/// y ~ c0 + c1 x with c0, c1 >= 0.
struct LinearFit {
  double c0 = 0.0, c1 = 0.0;
};

/// One collective's fitted line, seconds ~ c0 + c1 * its bytes (the bytes its model line's
/// beta multiplies); `groups`: the plan's groups that fitted it (0: a prior or a timing).
struct FittedLine {
  LinearFit fit;
  std::size_t groups = 0;
};

/// The top-k line and one line per collective by name ("allgather", "allreduce",
/// "sparse_allreduce", ...): what calibration times and the closed loop's refit fits, agreed
/// over ranks as the values of pack() in a fixed order (the names' order).
struct FittedModel {
  LinearFit topk;
  std::map<std::string, FittedLine, std::less<>> lines;
  /// The top-k's c0 and c1, then each line's c0, c1 and groups, lines in name order.
  std::vector<double> pack() const;
  /// The values of pack() (e.g. their maximum over ranks) back into these lines. Throws
  /// omgs::Error unless there are as many as pack() gives.
  void unpack(const std::vector<double>& values);
  /// The fitted line of `name`, nullptr if none.
  const FittedLine* find(std::string_view name) const;
};

/// Least squares, then constrained: a negative intercept refits through the origin, a
/// negative slope gives the mean as a constant. x and y are of equal, non-zero length.
LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y);

/// As fit_nonnegative, each point weighted by w[i] > 0 (x, y, w of equal, non-zero length).
LinearFit fit_nonnegative(const std::vector<double>& x, const std::vector<double>& y,
                          const std::vector<double>& w);

/// Which sample of a size's timings stands for it in fit_latency_bandwidth.
enum class SampleStatistic {
  fastest,  ///< on cores of its own, what slows a collective is noise that only adds time
  median,   ///< where ranks share cores, waiting for the scheduler is the run's own cost
};

/// Latency and bandwidth (y ~ alpha + beta x) from repeated timings: samples[i] holds the
/// timings at x[i] (non-empty, positive). Noise on a timed collective only adds time, so each
/// size is represented by its fastest sample (an outlier never sets it; `statistic` median
/// where the ranks share cores: on 16 emulated hosts on 2 cores the fastest of a few 1-pair
/// allgathers took 1.3 ms and their median 30 ms, docs/model-check.md), and the line is
/// fitted in relative error (weights 1 / y^2): the small sizes then decide alpha instead of
/// being drowned by the absolute noise of the large ones, which made least squares' alpha
/// vary 10-100x between runs. Where that line passes below the largest size's time, its
/// slope is raised to pass through it: a faster regime at the small sizes (at the emulated
/// cluster's 1 Gbit/s, the shaper's burst let 512 KiB through at 2-4x the link's rate) must
/// not set the rate of the largest messages, whose time the largest size measured (the
/// dense allreduce's line at two hosts was 2-4x low there). Non-negative as fit_nonnegative.
OMGS_EXPORT LinearFit fit_latency_bandwidth(const std::vector<double>& x,
                                            const std::vector<std::vector<double>>& samples,
                                            SampleStatistic statistic = SampleStatistic::fastest);

/// The smallest element; v must not be empty.
double minimum(const std::vector<double>& v);

/// The upper median (the element at size / 2 once sorted); v must not be empty.
double median(std::vector<double> v);

}  // namespace omgs::detail
