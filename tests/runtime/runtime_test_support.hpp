// Helpers shared by the runtime tests.
#pragma once

#include "mpi_world.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

namespace omgs_test {

/// The closed-loop tests' six layers (those of the C API's closed-loop test): sizes from 10
/// to 60000 elements, each with its backward time.
inline std::vector<omgs::LayerSpec> closed_loop_layers() {
  return {{"embed", 40000, 1e-3}, {"conv1", 15000, 5e-4},    {"bn1", 32, 1e-5},
          {"conv2", 60000, 1e-3}, {"fc.weight", 9000, 3e-4}, {"fc.bias", 10, 1e-5}};
}

inline std::vector<float> to_host(const omgs::ConstGradientView& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<float>(h.data(), h.data() + h.extent(0));
}

/// Copies host values into a device view (e.g. the runtime's gradient slot).
inline void copy_to(const omgs::GradientView& dst, const std::vector<float>& src) {
  Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(
      src.data(), src.size());
  Kokkos::deep_copy(dst, h);
}

/// Fills layer l's gradient with normal random values (also returned in `out`).
inline void fill_gradient(omgs::Runtime& rt, std::size_t l, std::mt19937& rng,
                          std::vector<float>& out) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  out.resize(rt.layers()[l].numel);
  for (float& x : out) x = nd(rng);
  copy_to(rt.gradient(l), out);
}

/// Busy-waits (a stand-in for a layer's backward computation).
inline void spin_for(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// Rank 0 writes `text` to `path` (e.g. a performance model); every rank returns after it.
inline std::string write_on_rank0(const std::string& path, const char* text) {
  if (world_rank() == 0) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) MPI_Abort(MPI_COMM_WORLD, 1);
    std::fputs(text, f);
    std::fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

/// An alpha-beta model of the allgather for any P (the reference model knows P = 2 .. 16
/// only), written by rank 0 to `path`: linear top-k, 1e-5 s + 1e-9 s per byte.
inline std::string any_p_allgather_model(const std::string& path) {
  return write_on_rank0(
      path, R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-9},
          "allgather": [], "allgather_formula": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9}})");
}

/// Collective: true if x is the same on every rank (compared through a hash).
inline bool same_everywhere(const std::string& x) {
  const unsigned long long h = std::hash<std::string>{}(x);
  unsigned long long lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The books of a conservation test: per entry of every layer, this rank's gradients summed
/// over iterations and the aggregated gradients times P. No gradient mass is lost when the
/// sum over ranks of every gradient equals the applied sum plus the sum over ranks of the
/// residuals.
struct MassLedger {
  std::vector<std::vector<double>> grad_sum, applied;
  explicit MassLedger(omgs::Runtime& rt) {
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      grad_sum.emplace_back(rt.layers()[l].numel, 0.0);
      applied.emplace_back(rt.layers()[l].numel, 0.0);
    }
  }
  void add_gradient(std::size_t l, const std::vector<float>& g) {
    for (std::size_t i = 0; i < g.size(); ++i) grad_sum[l][i] += g[i];
  }
  /// After finish(): this iteration's aggregated gradients.
  void add_applied(omgs::Runtime& rt) {
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto a = to_host(rt.aggregated(l));
      for (std::size_t i = 0; i < a.size(); ++i)
        applied[l][i] += static_cast<double>(a[i]) * world_size();
    }
  }
  /// Collective; true if it holds within `margin` everywhere (else `where` names the first
  /// entry that does not).
  bool conserved(omgs::Runtime& rt, double margin, std::string& where) const {
    for (std::size_t l = 0; l < rt.num_layers(); ++l) {
      const auto r = to_host(rt.residual(l));
      std::vector<double> local(r.begin(), r.end()), global(r.size()), grads(r.size());
      MPI_Allreduce(local.data(), global.data(), static_cast<int>(r.size()), MPI_DOUBLE, MPI_SUM,
                    MPI_COMM_WORLD);
      MPI_Allreduce(grad_sum[l].data(), grads.data(), static_cast<int>(r.size()), MPI_DOUBLE,
                    MPI_SUM, MPI_COMM_WORLD);
      for (std::size_t i = 0; i < r.size(); ++i)
        if (!(std::abs(global[i] + applied[l][i] - grads[i]) <= margin)) {
          where = "layer " + std::to_string(l) + " entry " + std::to_string(i) + ": residuals " +
                  std::to_string(global[i]) + " + applied " + std::to_string(applied[l][i]) +
                  " != gradients " + std::to_string(grads[i]);
          return false;
        }
    }
    return true;
  }
};

}  // namespace omgs_test
