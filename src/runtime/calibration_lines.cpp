// The registry of the lines' calibrations (calibration_lines.hpp) and the built-in ones: the
// allgather of pairs and the dense allreduce, timed at every start-up, and the sparse
// allreduce and the two-level exchanges, timed where a plan may use them.
#include "runtime/calibration_lines.hpp"

#include <algorithm>
#include <mutex>
#include <utility>

#include <omgs/error.hpp>
#include <omgs/perf_model.hpp>

#include "comm/collectives.hpp"

namespace omgs::detail {

namespace {

/// The allgather of (index, value) pairs, each size represented by its fastest (or median:
/// CalibrationContext::statistic) repetition (fit_latency_bandwidth), on the bytes every rank
/// receives; waited for as CalibrationContext::idle says.
LinearFit calibrate_allgather(const CalibrationContext& c) {
  std::vector<std::vector<double>> samples;
  std::vector<double> x;
  const CollectiveTimer timer = [idle = c.idle](MPI_Comm comm, std::size_t bytes, int reps) {
    return time_allgather(comm, bytes, reps, idle);
  };
  for (std::size_t k : {1, 16, 256, 2048, 8192, 32768}) {
    std::vector<double> t = time_collective(c.comm, k * sizeof(SparsePair), 0.02, timer);
    c.report->allgather_pairs.push_back(k);
    c.report->allgather_s.push_back(minimum(t));
    samples.push_back(std::move(t));
    x.push_back(static_cast<double>(k) * sizeof(SparsePair) * c.size);
  }
  return fit_latency_bandwidth(x, samples, c.statistic);
}

/// The dense groups' allreduce of n floats in the form the run uses (choose_dense_allreduce),
/// fitted on the 4n bytes (the model's allreduce table), sizes up to 4 MiB.
LinearFit calibrate_allreduce(const CalibrationContext& c) {
  const AllreduceForm form = c.dense_form;
  const CollectiveTimer timer = [form, idle = c.idle](MPI_Comm comm, std::size_t n, int reps) {
    return time_allreduce_form(comm, n, reps, form, idle);
  };
  std::vector<std::vector<double>> samples;
  std::vector<double> x;
  for (std::size_t n : {1, 1024, 16384, 131072, 1048576}) {
    std::vector<double> t = time_collective(c.comm, n, 0.02, timer);
    c.report->allreduce_numel.push_back(n);
    c.report->allreduce_s.push_back(minimum(t));
    samples.push_back(std::move(t));
    x.push_back(4.0 * static_cast<double>(n));
  }
  return fit_latency_bandwidth(x, samples, c.statistic);
}

struct CalibrationRegistry {
  std::mutex mutex;
  std::map<std::string, LineCalibration> lines;
  CalibrationRegistry() {
    lines["allgather"] = {true, calibrate_allgather};
    lines["allreduce"] = {true, calibrate_allreduce};
    // At two k of a 2^20 group.
    lines["sparse_allreduce"] = {
        false, [](const CalibrationContext& c) {
          return fit_sparse_allreduce(c.comm, std::uint64_t{1} << 20, {256, 16384});
        }};
    // The node-summed exchange on the run's node shape and density, groups of 2^16 and 2^20.
    lines["sparse_node"] = {false, [](const CalibrationContext& c) {
                              return fit_sparse_node(
                                  c.comm, c.ranks_per_node, c.density,
                                  {std::uint64_t{1} << 16, std::uint64_t{1} << 20});
                            }};
    // The two-level dense allreduce the same way (its form is its own: three steps).
    lines["allreduce_node"] = {false, [](const CalibrationContext& c) {
                                 return fit_allreduce_node(
                                     c.comm, c.ranks_per_node,
                                     {std::uint64_t{1} << 16, std::uint64_t{1} << 20});
                               }};
  }
};

CalibrationRegistry& registry() {
  static CalibrationRegistry r;
  return r;
}

}  // namespace

void register_line_calibration(const std::string& line, LineCalibration calibration) {
  if (line.empty()) throw Error("omgs::detail::register_line_calibration: the line has no name");
  if (!calibration.fit)
    throw Error("omgs::detail::register_line_calibration: line \"" + line + "\" has no fit");
  CalibrationRegistry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.lines[line] = std::move(calibration);
}

std::map<std::string, LineCalibration> line_calibrations(const std::vector<std::string>& lines) {
  CalibrationRegistry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::map<std::string, LineCalibration> out;
  for (const auto& [name, calibration] : r.lines)
    if (calibration.always || std::find(lines.begin(), lines.end(), name) != lines.end())
      out.emplace(name, calibration);
  return out;
}

std::vector<double> time_collective(MPI_Comm comm, std::size_t amount, double budget_s,
                                    const CollectiveTimer& timer) {
  std::vector<double> kept;
  double spent = 0.0;
  while (kept.size() < 9 && (kept.empty() || spent < budget_s)) {
    std::vector<double> t = timer(comm, amount, kept.empty() ? 4 : 3);
    if (kept.empty()) t.erase(t.begin());  // the first run warms up
    max_over_ranks(comm, t);
    for (double v : t) {
      spent += v;
      kept.push_back(v);
    }
  }
  return kept;
}

LinearFit fit_sparse_allreduce(MPI_Comm comm, std::uint64_t numel,
                               const std::vector<std::uint64_t>& ks, int repetitions,
                               double timeout_s) {
  const auto [rank, size] = rank_and_size(comm);
  std::vector<double> x;
  std::vector<std::vector<double>> samples;
  for (std::uint64_t k : ks) {
    // k pairs spread over the group, shifted per rank: the regions get pairs from every rank
    // and the sums mix overlapping and distinct indices, as top-k's selections do.
    const std::uint64_t step = numel / k;
    std::vector<SparsePair> pairs(k);
    for (std::uint64_t i = 0; i < k; ++i)
      pairs[i] = {static_cast<std::uint32_t>(i * step + static_cast<std::uint64_t>(rank) % step),
                  static_cast<float>((i * 2654435761u + static_cast<std::uint64_t>(rank)) % 1000)};
    std::vector<double> t = time_sparse_allreduce(comm, numel, k, pairs, repetitions, timeout_s);
    max_over_ranks(comm, t);
    x.push_back(AlphaBetaModel::sparse_allreduce_bytes(
        numel, size, static_cast<double>(k) / static_cast<double>(numel)));
    samples.push_back(std::move(t));
  }
  if (size > 1) return fit_latency_bandwidth(x, samples);
  // One rank moves no bytes: its exchange's local work, at the largest k, is all latency.
  LinearFit local;
  for (const std::vector<double>& t : samples) local.c0 = std::max(local.c0, minimum(t));
  return local;
}

}  // namespace omgs::detail
