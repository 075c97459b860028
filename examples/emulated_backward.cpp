// The emulated backward pass of omgs-train-synthetic (see emulated_backward.hpp).
#include "emulated_backward.hpp"
#include "bounded_mpi.hpp"
#include "median.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>

namespace omgs_train {

void emulate_layer(const omgs::GradientView& grad, std::uint64_t seed, int reps) {
  Kokkos::parallel_for(
      "omgs_train::backward", Kokkos::RangePolicy<omgs::ExecSpace>(0, grad.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) {
        std::uint64_t z = (seed + i) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float x = static_cast<float>(static_cast<double>(z >> 40) * (1.0 / 16777216.0)) - 0.5f;
        float acc = x;
        for (int r = 0; r < reps; ++r) acc = acc * 0.999f + 1e-3f * x;
        grad(i) = acc;
      });
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

KernelCost calibrate_kernel(MPI_Comm comm) {
  const std::size_t n = 1 << 20;
  omgs::GradientView v("omgs_train::calibrate", n);
  auto time = [&](int reps) {
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      omgs::ExecSpace().fence();
      const double a = now_s();
      emulate_layer(v, static_cast<std::uint64_t>(r), reps);
      omgs::ExecSpace().fence();
      t.push_back(now_s() - a);
    }
    return omgs_examples::median(t);
  };
  const double t0 = time(0), t16 = time(16);
  double c[2] = {t0 / n, std::max(1e-12, (t16 - t0) / (16.0 * n))}, g[2];
  // The slowest rank's costs, so every rank emulates the same times.
  omgs_examples::allreduce_or_abort(c, g, 2, MPI_DOUBLE, MPI_MAX, comm,
                                    "the kernel calibration's allreduce");
  return {g[0], g[1]};
}

/// Reps per element so that layer l's kernel lasts about target_s.
std::vector<int> layer_reps(const std::vector<omgs::LayerSpec>& layers, const KernelCost& cost,
                            double scale) {
  std::vector<int> reps;
  for (const omgs::LayerSpec& l : layers) {
    const double n = static_cast<double>(l.numel);
    const double extra = l.backward_s * scale - n * cost.fill_s;
    reps.push_back(extra > 0 ? static_cast<int>(std::min(1e7, extra / (n * cost.rep_s))) : 0);
  }
  return reps;
}

std::uint64_t seed_of(int rank, int iteration, std::size_t layer) {
  return (static_cast<std::uint64_t>(rank) << 48) ^ (static_cast<std::uint64_t>(iteration) << 24) ^
         (static_cast<std::uint64_t>(layer) * 1000003ull);
}

}  // namespace omgs_train
