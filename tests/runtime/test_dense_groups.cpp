// Sparse or dense per group in the runtime (issue #19), on 1, 2 and 4 ranks: a plan whose
// neighbouring groups alternate between MPI_Iallgatherv and MPI_Iallreduce runs without
// deadlock; dense groups give the dense average with the residual untouched, sparse groups
// the same result as an all-sparse run; gradient mass is conserved; a non-finite dense
// group fails on every rank and keeps healthy ranks' gradients in their residuals.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "dense_test_gradients.hpp"
#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {
// Big layers (top-k costs 1 us per element) are cheaper dense (an allreduce costs 1 ms);
// small ones are cheaper sparse. The allgather has no start-up cost, so MGS merges nothing
// beyond its fixed pair (the last two layers).
std::vector<omgs::LayerSpec> alternating_layers() {
  return {{"l0", 20000, 1e-4}, {"l1", 12, 1e-4}, {"l2", 30000, 1e-4}, {"l3", 9, 1e-4},
          {"l4", 25000, 1e-4}, {"l5", 11, 1e-4}, {"l6", 7, 1e-4},     {"l7", 40000, 1e-4}};
}

std::string write_model() {
  return omgs_test::write_on_rank0(
      "omgs_test_dense_groups_perf.json",
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-6},
          "allgather": [], "allgather_formula": {"alpha_s": 0, "beta_s_per_byte": 1e-12},
          "allreduce_formula": {"alpha_s": 1e-3, "beta_s_per_byte": 1e-12}})");
}

omgs::RuntimeOptions options(omgs::Planner planner, const std::string& perf) {
  omgs::RuntimeOptions opt;
  opt.density = 0.05;
  opt.planner = planner;
  opt.perf_model = perf;
  opt.backward_times = omgs::BackwardTimes::given;
  return opt;
}

/// Per iteration and layer, the aggregated gradient and residual of an all-sparse run.
struct SparseRun {
  std::vector<std::vector<std::vector<float>>> agg, res;  // [it][l][i]
  std::vector<std::size_t> group_numel;
};

/// The reference: the all-sparse MGS plan on the same inputs, run alone. One Runtime at a
/// time: a second runtime's progress thread would progress this one's collectives inside
/// MPI (global progress), an ordering ThreadSanitizer cannot see through Open MPI.
SparseRun run_sparse(const std::string& perf, int iterations) {
  omgs::Runtime sparse(MPI_COMM_WORLD, alternating_layers(), options(omgs::Planner::mgs, perf));
  SparseRun out;
  for (const omgs::Group& g : sparse.plan().groups) out.group_numel.push_back(g.numel);
  const std::size_t L = sparse.layers().size();
  for (int it = 0; it < iterations; ++it) {
    omgs_test::fill_dense(sparse, it);
    omgs_test::backward_all(sparse);
    REQUIRE(sparse.finish().status == omgs::Status::ok);
    out.agg.emplace_back(L);
    out.res.emplace_back(L);
    for (std::size_t l = 0; l < L; ++l) {
      out.agg.back()[l] = to_host(sparse.aggregated(l));
      out.res.back()[l] = to_host(sparse.residual(l));
    }
  }
  return out;
}
}  // namespace

TEST_CASE("dense groups: dense average, sparse as before, no deadlock, mass conserved",
          "[runtime][dense]") {
  const std::string perf = write_model();
  const SparseRun sparse = run_sparse(perf, 4);
  omgs::Runtime mixed(MPI_COMM_WORLD, alternating_layers(),
                      options(omgs::Planner::mgs_mixed, perf));
  const omgs::Plan& plan = mixed.plan();
  REQUIRE(plan.groups.size() == sparse.group_numel.size());
  for (std::size_t g = 0; g < plan.groups.size(); ++g)
    REQUIRE(plan.groups[g].numel == sparse.group_numel[g]);
  std::size_t switches = 0;
  for (std::size_t g = 1; g < plan.groups.size(); ++g)
    switches += plan.groups[g].collective != plan.groups[g - 1].collective;
  INFO("dense groups " << plan.dense_groups() << " of " << plan.groups.size());
  REQUIRE(plan.dense_groups() >= 2);
  REQUIRE(switches >= 3);  // neighbours use different collectives
  const int P = world_size();
  const std::size_t L = mixed.layers().size();
  std::vector<std::vector<double>> fed(L), applied(L);
  for (std::size_t l = 0; l < L; ++l) {
    fed[l].assign(mixed.layers()[l].numel, 0.0);
    applied[l].assign(mixed.layers()[l].numel, 0.0);
  }
  for (int it = 0; it < 4; ++it) {
    omgs_test::fill_dense(mixed, it);
    omgs_test::backward_all(mixed);
    REQUIRE(mixed.finish().status == omgs::Status::ok);
    for (const omgs::Group& gr : plan.groups)
      for (std::size_t l = gr.begin; l < gr.end; ++l) {
        const auto agg = to_host(mixed.aggregated(l));
        const auto res = to_host(mixed.residual(l));
        for (std::size_t i = 0; i < agg.size(); ++i) {
          for (int r = 0; r < P; ++r) fed[l][i] += omgs_test::dense_value(r, it, l, i);
          applied[l][i] += double(P) * agg[i];
        }
        if (gr.collective == omgs::Collective::sparse) {
          CHECK(agg == sparse.agg[it][l]);  // bit for bit: the same exchange
          CHECK(res == sparse.res[it][l]);
          continue;
        }
        for (std::size_t i = 0; i < agg.size(); ++i) {
          double mean = 0;
          for (int r = 0; r < P; ++r) mean += omgs_test::dense_value(r, it, l, i);
          mean /= P;
          REQUIRE(std::fabs(agg[i] - mean) <= 1e-5 * (1.0 + std::fabs(mean)));
          REQUIRE(res[i] == 0.0f);  // residual untouched
        }
      }
  }
  // Conservation over all iterations: the sum over ranks of what was fed in equals P times
  // the applied aggregates plus what the residuals still hold.
  for (std::size_t l = 0; l < L; ++l) {
    const auto res = to_host(mixed.residual(l));
    std::vector<double> held(res.begin(), res.end());
    MPI_Allreduce(MPI_IN_PLACE, held.data(), int(held.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < held.size(); ++i)
      REQUIRE(std::fabs(fed[l][i] - applied[l][i] - held[i]) <=
              1e-4 * (1.0 + std::fabs(fed[l][i])));
  }
  CHECK(mixed.progress_stats().groups_completed == 4 * plan.groups.size());
}

TEST_CASE("dense groups: a non-finite dense group fails everywhere, mass kept",
          "[runtime][dense]") {
  const std::string perf = write_model();
  omgs::Runtime rt(MPI_COMM_WORLD, alternating_layers(), options(omgs::Planner::mgs_mixed, perf));
  std::size_t dense_layer = rt.layers().size();
  for (const omgs::Group& g : rt.plan().groups)
    if (g.collective == omgs::Collective::dense) dense_layer = g.begin;
  REQUIRE(dense_layer < rt.layers().size());
  omgs_test::fill_dense(rt, 0);
  const bool poisoned = world_rank() == world_size() - 1;
  if (poisoned) {
    std::vector<float> g = to_host(rt.gradient(dense_layer));
    g[3] = std::nanf("");
    omgs_test::copy_to(rt.gradient(dense_layer), g);
  }
  omgs_test::backward_all(rt);
  const omgs::IterationStats st = rt.finish();
  CHECK(st.status == omgs::Status::nonfinite_gradient);
  CHECK(rt.plan().groups[std::size_t(st.failed_group)].collective == omgs::Collective::dense);
  const auto agg = to_host(rt.aggregated(dense_layer));
  const auto res = to_host(rt.residual(dense_layer));
  for (std::size_t i = 0; i < agg.size(); ++i) {
    REQUIRE(agg[i] == 0.0f);
    // A healthy rank keeps its gradient; the poisoned one keeps its residual as it was.
    REQUIRE(res[i] == (poisoned ? 0.0f : omgs_test::dense_value(world_rank(), 0, dense_layer, i)));
  }
  // Training goes on.
  omgs_test::fill_dense(rt, 1);
  omgs_test::backward_all(rt);
  CHECK(rt.finish().status == omgs::Status::ok);
}
