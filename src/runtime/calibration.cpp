// Calibration: top-k timed on this device, the model's lines timed on the communicator
// (calibration_lines.hpp: those the run may use and those always timed), a non-negative
// linear fit of each (plan/fit.hpp), and the slowest rank's coefficients for everybody.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include <omgs/detail/kokkos_helpers.hpp>

#include "plan/fit.hpp"
#include "runtime/calibration_lines.hpp"
#include "runtime/runtime_impl.hpp"

namespace omgs::detail {

/// Top-k on this device at each of `sizes` (ascending): three timed runs after a warm-up
/// each, returned per size (the report keeps the fastest). A free function with external
/// linkage: it holds a device lambda.
std::vector<std::vector<double>> time_topk(const std::vector<std::uint64_t>& sizes, double density,
                                           CalibrationReport& calibration) {
  const std::uint64_t n_max = sizes.back();
  TopkSelector<ExecSpace> sel(n_max, selected_count(n_max, density));
  Kokkos::View<float*, DeviceMemory> x("omgs::calibrate::x", n_max);
  Kokkos::View<std::uint32_t*, DeviceMemory> idx("omgs::calibrate::idx", n_max);
  Kokkos::View<float*, DeviceMemory> val("omgs::calibrate::val", n_max);
  Kokkos::parallel_for(
      OMGS_LABEL("omgs::calibrate::fill"), Kokkos::RangePolicy<ExecSpace>(0, n_max),
      KOKKOS_LAMBDA(const std::uint64_t i) {
        std::uint64_t z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x(i) = static_cast<float>(static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0) - 0.5);
      });
  std::vector<std::vector<double>> samples;
  for (std::uint64_t n : sizes) {
    auto xs = Kokkos::subview(x, std::make_pair(std::uint64_t{0}, n));
    const std::size_t k = selected_count(n, density);
    std::vector<double> t;
    for (int r = 0; r < 4; ++r) {
      ExecSpace().fence();
      const double a = now_s();
      (void)sel.select(xs, k, idx, val);
      ExecSpace().fence();
      if (r > 0) t.push_back(now_s() - a);  // the first run warms up
    }
    calibration.topk_numel.push_back(n);
    calibration.topk_s.push_back(minimum(t));
    samples.push_back(std::move(t));
  }
  return samples;
}

void RuntimeImpl::calibrate() {
  const double t_start = now_s();
  const std::uint64_t total =
      std::accumulate(layers.begin(), layers.end(), std::uint64_t{0},
                      [](std::uint64_t a, const LayerSpec& l) { return a + l.numel; });
  // Top-k on this device: a handful of sizes up to the model (capped to stay well under a
  // second); the linear fit extrapolates beyond.
  const std::uint64_t n_max =
      std::max<std::uint64_t>(1024, std::min<std::uint64_t>(total, 1u << 21));
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t n = n_max; n >= 1024 && sizes.size() < 4; n /= 8) sizes.push_back(n);
  std::reverse(sizes.begin(), sizes.end());
  const std::vector<std::vector<double>> topk_samples =
      time_topk(sizes, options.density, calibration);
  std::vector<double> tx;
  for (std::uint64_t n : calibration.topk_numel) tx.push_back(static_cast<double>(n));
  FittedModel fit;
  fit.topk = fit_latency_bandwidth(tx, topk_samples);
  // One line per collective the run may use whose calibration is registered, and the lines
  // always timed, in name order on every rank (calibration_lines.hpp).
  std::vector<std::string> allowed;
  const CollectiveSet set = allowed_collectives(plan_config());
  for (const CollectiveRow& row : collective_rows())
    if (set.contains(row.id)) allowed.push_back(row.line);
  CalibrationContext context{comm, size, calibration.dense_allreduce.form, &calibration};
  context.ranks_per_node = options.ranks_per_node;
  context.density = options.density;
  context.idle = progress_idle(comm, Kokkos::DefaultHostExecutionSpace().concurrency());
  if (context.idle.spin_iterations == 0) context.statistic = SampleStatistic::median;
  for (const auto& [line, timing] : line_calibrations(allowed))
    fit.lines[line].fit = timing.fit(context);
  // The slowest rank sets the pace: every rank plans with the maximum, so plans agree
  // (every rank times the same collectives: the same lines, packed in the same order).
  std::vector<double> c = fit.pack();
  max_over_ranks(comm, c);
  fit.unpack(c);
  auto at_size = [this](const LinearFit& l) {
    return CollectiveCosts{{{size, {l.c0, l.c1}}}, false, {}};
  };
  AlphaBetaModel fitted(TopkForm::linear, fit.topk.c0, fit.topk.c1,
                        at_size(fit.find("allgather")->fit), {});
  for (const auto& [name, line] : fit.lines) fitted = fitted.with_line(name, at_size(line.fit));
  model = std::make_unique<AlphaBetaModel>(std::move(fitted));
  calibration.duration_s = now_s() - t_start;
}

void RuntimeImpl::choose_dense_allreduce() {
  AllreduceFormChoice& c = calibration.dense_allreduce;
  c.median_s.fill(std::numeric_limits<double>::quiet_NaN());
  if (options.dense_allreduce != DenseAllreduce::automatic) {
    c.form = options.dense_allreduce == DenseAllreduce::blocking ? AllreduceForm::blocking
                                                                 : AllreduceForm::nonblocking;
    // A forced form leaves the MPI_T settings as they are (a previous choice's, or the MPI's).
    c.setting = c.form == AllreduceForm::nonblocking ? applied_allreduce_setting() : -1;
    return;
  }
  // The two forms the dense wire posts (a blocking one only where a progress thread calls
  // it), and MPI_Iallreduce under each writable MPI_T setting (allreduce_settings()), timed
  // on the model's size (the largest a dense group can be) up to 16 Mi floats: the forms
  // differ for large messages, where MPI switches algorithms (docs/comm.md), and tie below,
  // so the large-message winner costs little on small groups.
  std::vector<AllreduceForm> forms = {AllreduceForm::nonblocking};
  if (progress_thread_available(options.force_inline_progress))
    forms.push_back(AllreduceForm::blocking);
  std::uint64_t total = 0;
  for (const LayerSpec& l : layers) total += l.numel;
  c = choose_allreduce_form(comm, std::min<std::uint64_t>(total, std::uint64_t{1} << 24), 3, forms);
}

}  // namespace omgs::detail

namespace omgs {

void Runtime::save_perf_model(const std::string& path) const {
  const AlphaBetaModel* ab = impl_->model->as_alpha_beta();
  if (ab == nullptr)
    throw Error("omgs::Runtime::save_perf_model: the model in force is not an alpha-beta model (" +
                impl_->model->describe() + "); calibrate, or refit it with refit_iterations > 0");
  ab->save(path);
}

}  // namespace omgs
