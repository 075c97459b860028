// The two-level dense allreduce in the runtime (Collective::allreduce_node, issue 45), on 1 to
// 8 ranks in 1 to 4 nodes made by RuntimeOptions::ranks_per_node: opt-in (a run that does not
// allow it never gets it), chosen by mgs_mixed where its line is cheapest, the dense average
// with the residual untouched, mass conserved; a non-finite group fails on every rank and
// keeps healthy ranks' gradients in their residuals; OMGS_RANKS_PER_NODE and the agreement.
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "dense_test_gradients.hpp"
#include "group_counts.hpp"
#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"

using omgs_test::count_collective;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {
// Big layers are cheaper dense; the two-level line is cheaper than the flat one.
std::vector<omgs::LayerSpec> layers() {
  return {{"l0", 20001, 1e-4}, {"l1", 12, 1e-4}, {"l2", 30003, 1e-4}, {"l3", 9, 1e-4}};
}

std::string write_model() {
  return omgs_test::write_on_rank0(
      "omgs_test_node_groups_perf.json",
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-6},
          "allgather": [], "allgather_formula": {"alpha_s": 0, "beta_s_per_byte": 1e-12},
          "allreduce_formula": {"alpha_s": 1e-3, "beta_s_per_byte": 1e-12},
          "allreduce_node_formula": {"alpha_s": 5e-4, "beta_s_per_byte": 1e-12}})");
}

omgs::RuntimeOptions options(const std::string& perf, int ranks_per_node, bool allow) {
  omgs::RuntimeOptions opt;
  opt.density = 0.05;
  opt.planner = omgs::Planner::mgs_mixed;
  opt.perf_model = perf;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.read_environment = false;
  opt.ranks_per_node = ranks_per_node;
  if (allow)
    opt.collectives = {omgs::Collective::sparse, omgs::Collective::dense,
                       omgs::Collective::allreduce_node};
  return opt;
}

}  // namespace

TEST_CASE("two-level groups: opt-in, dense average, mass conserved", "[runtime][node]") {
  const std::string perf = write_model();
  const int P = world_size();
  {
    omgs::Runtime flat(MPI_COMM_WORLD, layers(), options(perf, 0, false));
    CHECK(count_collective(flat.plan().groups, omgs::Collective::allreduce_node) ==
          0);  // not allowed: never chosen
  }
  const int rpn = P >= 4 ? P / 2 : P;  // 1 to 4 nodes with the other tests' P
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(perf, rpn, true));
  REQUIRE(count_collective(rt.plan().groups, omgs::Collective::allreduce_node) >= 2);
  CHECK(rt.progress_stats().ranks_per_node == rpn);
  const std::size_t L = rt.layers().size();
  std::vector<std::vector<double>> fed(L), applied(L);
  for (std::size_t l = 0; l < L; ++l) {
    fed[l].assign(rt.layers()[l].numel, 0.0);
    applied[l].assign(rt.layers()[l].numel, 0.0);
  }
  for (int it = 0; it < 3; ++it) {
    omgs_test::fill_dense(rt, it);
    omgs_test::backward_all(rt);
    REQUIRE(rt.finish().status == omgs::Status::ok);
    for (const omgs::Group& gr : rt.plan().groups)
      for (std::size_t l = gr.begin; l < gr.end; ++l) {
        const auto agg = to_host(rt.aggregated(l));
        const auto res = to_host(rt.residual(l));
        for (std::size_t i = 0; i < agg.size(); ++i) {
          double mean = 0;
          for (int r = 0; r < P; ++r) mean += omgs_test::dense_value(r, it, l, i);
          fed[l][i] += mean;
          applied[l][i] += agg[i];
          mean /= P;
          if (gr.collective != omgs::Collective::allreduce_node) continue;
          REQUIRE(std::fabs(agg[i] - mean) <= 1e-5 * (1.0 + std::fabs(mean)));
          REQUIRE(res[i] == 0.0f);  // residual untouched
        }
      }
  }
  // Conservation: what was fed in = P x the applied aggregates + what the residuals hold.
  for (std::size_t l = 0; l < L; ++l) {
    const auto res = to_host(rt.residual(l));
    std::vector<double> held(res.begin(), res.end());
    MPI_Allreduce(MPI_IN_PLACE, held.data(), int(held.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < held.size(); ++i)
      REQUIRE(std::fabs(fed[l][i] - double(P) * applied[l][i] - held[i]) <=
              1e-4 * (1.0 + std::fabs(fed[l][i])));
  }
}

TEST_CASE("two-level groups: a non-finite group fails everywhere, mass kept", "[runtime][node]") {
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), options(write_model(), 1, true));
  std::size_t layer = rt.layers().size();
  for (const omgs::Group& g : rt.plan().groups)
    if (g.collective == omgs::Collective::allreduce_node) layer = g.begin;
  REQUIRE(layer < rt.layers().size());
  omgs_test::fill_dense(rt, 0);
  const bool poisoned = world_rank() == world_size() - 1;
  if (poisoned) {
    std::vector<float> g = to_host(rt.gradient(layer));
    g[3] = std::nanf("");
    omgs_test::copy_to(rt.gradient(layer), g);
  }
  omgs_test::backward_all(rt);
  const omgs::IterationStats st = rt.finish();
  CHECK(st.status == omgs::Status::nonfinite_gradient);
  CHECK(rt.plan().groups[std::size_t(st.failed_group)].collective ==
        omgs::Collective::allreduce_node);
  const auto agg = to_host(rt.aggregated(layer));
  const auto res = to_host(rt.residual(layer));
  for (std::size_t i = 0; i < agg.size(); ++i) {
    REQUIRE(agg[i] == 0.0f);
    REQUIRE(res[i] == (poisoned ? 0.0f : omgs_test::dense_value(world_rank(), 0, layer, i)));
  }
  omgs_test::fill_dense(rt, 1);
  omgs_test::backward_all(rt);
  CHECK(rt.finish().status == omgs::Status::ok);
}

TEST_CASE("ranks_per_node: OMGS_RANKS_PER_NODE wins; ranks must agree", "[runtime][node]") {
  const std::string perf = write_model();
  const int P = world_size();
  omgs::RuntimeOptions opt = options(perf, 0, true);
  opt.read_environment = true;
  setenv("OMGS_RANKS_PER_NODE", std::to_string(P).c_str(), 1);
  {
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
    CHECK(rt.progress_stats().ranks_per_node == P);
    CHECK(rt.progress_stats().nodes == 1);
  }
  setenv("OMGS_RANKS_PER_NODE", "-2", 1);
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), opt),
                    Catch::Contains("OMGS_RANKS_PER_NODE"));
  unsetenv("OMGS_RANKS_PER_NODE");
  if (P > 1) {
    CHECK_THROWS_WITH(
        omgs::Runtime(MPI_COMM_WORLD, layers(), options(perf, world_rank() == 0 ? 1 : P, true)),
        Catch::Contains("ranks disagree on the option ranks_per_node"));
  }
}
