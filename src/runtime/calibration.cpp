// Calibration: top-k timed on this device, the allgather of pairs and the dense allreduce
// (and the sparse allreduce when the plan may use it) timed on the communicator (through comm),
// a non-negative linear fit of each (plan/fit.hpp), and the slowest rank's coefficients (top-k)
// or timings (allgather) for everybody.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include <omgs/detail/kokkos_helpers.hpp>

#include "plan/fit.hpp"
#include "runtime/calibration_sparse.hpp"
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

namespace {

/// The allgather (`amount` bytes per rank) or allreduce (`amount` floats): a warm-up, then rounds
/// of three repetitions until nine are kept or those kept took `budget_s` (a slow link then costs
/// what it did before this estimator: four allgathers a size). Each repetition's time is the
/// maximum over ranks, so every rank takes the same decisions and fits the same points.
using CollectiveTimer = std::function<std::vector<double>(MPI_Comm, std::size_t, int)>;

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

}  // namespace

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
  // Allgather of (index, value) pairs on this communicator, each repetition the slowest
  // rank's time; each size is represented by its fastest repetition (fit_latency_bandwidth).
  std::vector<std::vector<double>> ag_samples;
  std::vector<double> ax;
  for (std::size_t k : {1, 16, 256, 2048, 8192, 32768}) {
    std::vector<double> t = time_collective(comm, k * sizeof(SparsePair), 0.02, time_allgather);
    calibration.allgather_pairs.push_back(k);
    calibration.allgather_s.push_back(minimum(t));
    ag_samples.push_back(std::move(t));
    ax.push_back(static_cast<double>(k) * sizeof(SparsePair) * size);
  }
  // The dense groups' allreduce of n floats in the form the run uses (choose_dense_allreduce),
  // fitted on the 4n bytes (the model's allreduce table), sizes up to 4 MiB.
  const AllreduceForm form = calibration.dense_allreduce.form;
  const CollectiveTimer allreduce = [form](MPI_Comm c, std::size_t n, int reps) {
    return time_allreduce_form(c, n, reps, form);
  };
  std::vector<std::vector<double>> ar_samples;
  std::vector<double> rx;
  for (std::size_t n : {1, 1024, 16384, 131072, 1048576}) {
    std::vector<double> t = time_collective(comm, n, 0.02, allreduce);
    calibration.allreduce_numel.push_back(n);
    calibration.allreduce_s.push_back(minimum(t));
    ar_samples.push_back(std::move(t));
    rx.push_back(4.0 * static_cast<double>(n));
  }
  std::vector<double> tx;
  for (std::uint64_t n : calibration.topk_numel) tx.push_back(static_cast<double>(n));
  // One line per collective timed, each on the bytes its model line's beta multiplies.
  FittedModel fit;
  fit.topk = fit_latency_bandwidth(tx, topk_samples);
  fit.lines["allgather"].fit = fit_latency_bandwidth(ax, ag_samples);
  fit.lines["allreduce"].fit = fit_latency_bandwidth(rx, ar_samples);
  // The sparse allreduce only where a plan may use it (RuntimeOptions::sparse_exchange
  // allreduce or automatic), at two k of a 2^20 group.
  if (plan_config().sparse_exchange != SparseExchange::allgather)
    fit.lines["sparse_allreduce"].fit =
        fit_sparse_allreduce(comm, std::uint64_t{1} << 20, {256, 16384});
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
