// Soak test: 10,000 iterations (OMGS_SOAK_ITERATIONS) of a runtime with random gradients, or
// as many as fit in OMGS_SOAK_SECONDS (420 s; at least 2,000) on a loaded machine.
// Every iteration it checks that no gradient mass is lost: on each rank the new residual
// plus what was sent equals the old residual plus the gradient, element by element and
// bit for bit; over all ranks the aggregated gradient times P equals the sum of what every
// rank sent. Over the run: ready() and finish() make no heap allocation, and the resident
// memory stays flat. A hang fails the CTest timeout.
#include <mpi.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "../runtime/runtime_test_support.hpp"
#include "omgs_catch.hpp"

#include "count_allocations.hpp"

namespace {

using HostView = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

long rss_kib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * 4;  // 4 KiB pages
}

}  // namespace

TEST_CASE("soak: thousands of iterations, mass conserved every iteration, memory flat", "[soak]") {
  const int P = omgs_test::world_size();
  const int rank = omgs_test::world_rank();
  const char* env = std::getenv("OMGS_SOAK_ITERATIONS");
  const int max_iterations = env != nullptr ? std::atoi(env) : 10000;
  // A time budget (OMGS_SOAK_SECONDS, default 420 s) instead of idle cores: on a loaded
  // machine the run stops early, all ranks at the same iteration, but never before
  // min_iterations (the memory check needs a long steady state after iteration min/10).
  const char* budget_env = std::getenv("OMGS_SOAK_SECONDS");
  const double budget_s = budget_env != nullptr ? std::atof(budget_env) : 420.0;
  const int min_iterations = std::min(max_iterations, 2000);
  const double t_start = MPI_Wtime();
  int iterations = max_iterations;
  omgs::RuntimeOptions opt;
  opt.density = 0.02;
  opt.perf_model = "calibrate";
  // Exact values on the wire: the checks below want a sent entry's residual exactly 0 (the
  // compact pairs keep their rounding error there: tests/runtime/test_pair_wire.cpp).
  opt.pair_wire = omgs::PairWire::pairs8;
  // OMGS_SOAK_PLANNER: another planner, e.g. mgs (all groups sparse) with
  // OMGS_SPARSE_EXCHANGE=allreduce (every group a sparse allreduce; tests/soak/CMakeLists.txt).
  const char* planner_env = std::getenv("OMGS_SOAK_PLANNER");
  opt.planner = planner_env != nullptr ? omgs::parse_planner(planner_env) : omgs::Planner::optimal;
  // The closed loop too: refits (and plan switches) in the first iterations, then settled;
  // from iteration 10 on it must allocate nothing either.
  opt.refit_iterations = 3;
  opt.max_replans = 2;
  opt.replan_min_gain = 0.0;
  const std::vector<omgs::LayerSpec> layers = {{"embed", 2048, 2e-4}, {"conv", 777, 1e-4},
                                               {"bn", 16, 1e-6},      {"fc1", 3000, 3e-4},
                                               {"fc2", 500, 5e-5},    {"out", 10, 1e-6}};
  omgs::Runtime rt(MPI_COMM_WORLD, layers, opt);
  const std::size_t L = layers.size();
  std::size_t k_total = 0;
  for (std::size_t g = 0; g < rt.plan().groups.size(); ++g) k_total += rt.group_k(g);
  // Per layer, whether its group is dense (the calibrated model may make some) in the plan
  // that produced the iteration: a closed-loop switch in finish() changes rt.plan() at once.
  std::vector<char> layer_dense(L);
  const auto dense_of_plan = [&] {
    for (std::size_t l = 0; l < L; ++l)
      layer_dense[l] =
          rt.plan().groups[rt.plan().group_of_layer[l]].collective == omgs::Collective::dense;
  };
  dense_of_plan();

  // Host copies, allocated once.
  std::vector<std::vector<float>> grad(L), resid(L), resid_new(L), agg(L);
  for (std::size_t l = 0; l < L; ++l) {
    grad[l].resize(layers[l].numel);
    resid[l].assign(layers[l].numel, 0.0f);
    resid_new[l].resize(layers[l].numel);
    agg[l].resize(layers[l].numel);
  }
  std::mt19937 rng(1000 + static_cast<unsigned>(rank));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  long rss_start = 0;
  long allocs = 0;
  std::size_t failures = 0;
  int refits = 0;
  for (int it = 0; it < iterations; ++it) {
    if (it == min_iterations / 10) rss_start = rss_kib();
    // Some iterations scale the gradient up or down by orders of magnitude.
    const float scale = it % 97 == 0 ? 1e4f : (it % 89 == 0 ? 1e-4f : 1.0f);
    for (std::size_t l = 0; l < L; ++l) {
      for (float& x : grad[l]) x = nd(rng) * scale;
      Kokkos::deep_copy(rt.gradient(l), HostView(grad[l].data(), grad[l].size()));
    }
    omgs_test::count_allocations.store(it >=
                                       10);  // after the first iterations' one-time initializations
    rt.begin_backward();
    for (std::size_t l = L; l-- > 0;)
      if (rt.ready(l) != omgs::Status::ok) ++failures;
    const omgs::IterationStats st = rt.finish();
    omgs_test::count_allocations.store(false);
    allocs = omgs_test::allocations.load();
    if (st.status != omgs::Status::ok) {
      FAIL("iteration " << it << ": " << rt.last_error());
    }
    refits += st.refitted;
    if (st.refitted && it >= 10) FAIL("iteration " << it << ": the closed loop did not settle");
    // Per rank, exact: each element was either kept (residual = old residual + gradient,
    // as the float sum) or sent (residual 0, the sum went out). Exactly k per group sent.
    double sent_sum = 0.0;
    std::size_t sent = 0;
    for (std::size_t l = 0; l < L; ++l) {
      Kokkos::deep_copy(HostView(resid_new[l].data(), resid_new[l].size()), rt.residual(l));
      Kokkos::deep_copy(HostView(agg[l].data(), agg[l].size()), rt.aggregated(l));
      // A dense group sends its whole gradient and leaves the residual untouched.
      const bool dense = layer_dense[l] != 0;
      for (std::size_t i = 0; dense && i < grad[l].size(); ++i) {
        if (resid_new[l][i] != resid[l][i]) ++failures;
        sent_sum += grad[l][i];
      }
      for (std::size_t i = 0; !dense && i < grad[l].size(); ++i) {
        const float acc = resid[l][i] + grad[l][i];
        if (acc == 0.0f) {  // kept or sent, no mass either way (exact cancellation)
          if (resid_new[l][i] != 0.0f) ++failures;
          continue;
        }
        if (resid_new[l][i] == acc) continue;
        if (resid_new[l][i] == 0.0f) {
          sent_sum += acc;
          ++sent;
          continue;
        }
        ++failures;  // neither kept nor sent: mass lost or invented
      }
      resid[l].swap(resid_new[l]);
    }
    // Exactly k per group, less any exact zeros among them.
    if (sent > k_total) ++failures;
    // All ranks: P * aggregated == the sum of every rank's sent values.
    double agg_sum = 0.0;
    for (std::size_t l = 0; l < L; ++l)
      for (float a : agg[l]) agg_sum += static_cast<double>(a) * P;
    // The third sum: ranks past the time budget (any one stops every rank).
    const bool over = it + 1 >= min_iterations && MPI_Wtime() - t_start > budget_s;
    double sums[3] = {sent_sum, std::fabs(sent_sum), over ? 1.0 : 0.0}, global[3];
    MPI_Allreduce(sums, global, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (global[2] > 0) iterations = it + 1;
    if (std::fabs(agg_sum - global[0]) > 1e-5 * (global[1] + 1.0)) ++failures;
    if (failures > 0) {
      FAIL("iteration " << it << ": " << failures << " conservation failure(s); sent " << sent
                        << " of k = " << k_total << ", P*aggregated " << agg_sum
                        << " vs sent by all " << global[0]);
    }
    if (st.replanned) {  // the closed loop switched plans: new groups, new k from now on
      k_total = 0;
      for (std::size_t g = 0; g < rt.plan().groups.size(); ++g) k_total += rt.group_k(g);
      dense_of_plan();
    }
  }
  const long rss_end = rss_kib();
  INFO("resident memory " << rss_start << " KiB at iteration " << min_iterations / 10 << ", "
                          << rss_end << " KiB at the end");
  CHECK(iterations >= min_iterations);
#ifndef OMGS_TEST_UNDER_ASAN
  CHECK(allocs == 0);
  CHECK(rss_end - rss_start < 4096);
#endif
  CHECK(rt.last_stats().iteration == static_cast<std::uint64_t>(iterations - 1));
  CHECK(refits >= 1);  // the closed loop ran (and settled: no refit from iteration 10 on)
  CHECK(rt.last_refit().settled);
  // The final plan's groups per collective (OMGS_SPARSE_EXCHANGE=allreduce: sparse allreduces).
  std::string groups;
  for (const omgs::Collective c :
       {omgs::Collective::sparse, omgs::Collective::dense, omgs::Collective::sparse_allreduce}) {
    const auto n = std::count_if(rt.plan().groups.begin(), rt.plan().groups.end(),
                                 [c](const omgs::Group& g) { return g.collective == c; });
    groups += " " + std::to_string(n) + " " + std::string(omgs::to_string(c));
  }
  if (rank == 0)
    std::printf(
        "soak: %d of %d iterations (%.0f s, budget %.0f s) on %d ranks, %ld heap allocations in "
        "ready/finish, RSS %ld -> %ld KiB; closed loop: %d refits, %u plan changes; final "
        "plan:%s\n",
        iterations, max_iterations, MPI_Wtime() - t_start, budget_s, P, allocs, rss_start, rss_end,
        refits, rt.last_stats().plan_generation, groups.c_str());
}
