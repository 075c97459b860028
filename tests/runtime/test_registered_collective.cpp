// A collective is a row (issue 44): the test-only "reduce_bcast" (reduce_bcast_collective.cpp,
// registered here and nowhere in omgs) is planned where the model prices it lowest, never
// where it is dearer or not allowed, and runs on 1, 2 and 4 ranks: the dense average on every
// rank, its own wire's posts, the trace naming it, gradient mass conserved. Ranks that allow
// different collectives are refused on every rank.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "group_counts.hpp"
#include "omgs_catch.hpp"
#include "reduce_bcast_collective.hpp"
#include "runtime_test_support.hpp"

using omgs::Collective;
using omgs_test::to_host;
using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

std::vector<omgs::LayerSpec> layers() {
  return {{"l0", 20000, 1e-4}, {"l1", 12, 1e-4}, {"l2", 30000, 1e-4}, {"l3", 900, 1e-4}};
}

// Top-k costs 1 us per element, so the sparse exchanges lose to any dense form; the dense
// allreduce costs 1 ms a group; reduce_bcast 10 us (cheap) or 10 ms (dear).
std::string write_model(const char* name, const char* rb_alpha) {
  const std::string text =
      std::string(R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-6},
          "allgather": [], "allgather_formula": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-10},
          "allreduce_formula": {"alpha_s": 1e-3, "beta_s_per_byte": 1e-10},
          "reduce_bcast_formula": {"alpha_s": )") +
      rb_alpha + R"(, "beta_s_per_byte": 1e-10}})";
  return omgs_test::write_on_rank0(name, text.c_str());
}

omgs::RuntimeOptions options(const std::string& perf, Collective rb) {
  omgs::RuntimeOptions opt;
  opt.density = 0.05;
  opt.planner = omgs::Planner::optimal;
  opt.perf_model = perf;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.refit_iterations = 0;  // the plan under test stays in force
  opt.collectives = {Collective::sparse, Collective::dense, rb};
  return opt;
}

float value(int rank, int it, std::size_t l, std::size_t i) {
  return std::cos(0.29f * float(i) + 1.1f * float(rank) + 0.5f * float(it) + float(l));
}

}  // namespace

TEST_CASE("registered collective: planned where cheapest, run with the dense average",
          "[runtime][table]") {
  const Collective rb = omgs_test::register_reduce_bcast();
  const std::string trace = "omgs_test_reduce_bcast_trace.%r.json";
  omgs::RuntimeOptions opt = options(write_model("omgs_test_rb_cheap.json", "1e-5"), rb);
  opt.trace_path = trace;
  const long posts_before = omgs_test::reduce_bcast_posts();
  int iterations = 4;
  std::size_t groups = 0;
  {
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
    const omgs::Plan& plan = rt.plan();
    groups = plan.groups.size();
    INFO("groups " << groups);
    REQUIRE(omgs_test::count_collective(plan.groups, rb) ==
            groups);  // every group: it is the cheapest row
    CHECK(omgs_test::same_everywhere(omgs::plan_to_json(plan, rt.layers(), {world_size()})));
    const int P = world_size();
    const std::size_t L = rt.layers().size();
    std::vector<std::vector<double>> fed(L), applied(L);
    for (std::size_t l = 0; l < L; ++l) {
      fed[l].assign(rt.layers()[l].numel, 0.0);
      applied[l].assign(rt.layers()[l].numel, 0.0);
    }
    for (int it = 0; it < iterations; ++it) {
      for (std::size_t l = 0; l < L; ++l) {
        std::vector<float> g(rt.layers()[l].numel);
        for (std::size_t i = 0; i < g.size(); ++i) g[i] = value(world_rank(), it, l, i);
        omgs_test::copy_to(rt.gradient(l), g);
      }
      for (std::size_t l = L; l-- > 0;) REQUIRE(rt.ready(l) == omgs::Status::ok);
      REQUIRE(rt.finish().status == omgs::Status::ok);
      for (std::size_t l = 0; l < L; ++l) {
        const auto agg = to_host(rt.aggregated(l));
        for (std::size_t i = 0; i < agg.size(); ++i) {
          double mean = 0;
          for (int r = 0; r < P; ++r) mean += value(r, it, l, i);
          fed[l][i] += mean;
          mean /= P;
          applied[l][i] += double(P) * agg[i];
          REQUIRE(std::fabs(agg[i] - mean) <= 1e-5 * (1.0 + std::fabs(mean)));
        }
      }
    }
    // Mass: what every rank fed in was applied (a dense form keeps no residual).
    for (std::size_t l = 0; l < L; ++l) {
      const auto res = to_host(rt.residual(l));
      for (std::size_t i = 0; i < res.size(); ++i) {
        REQUIRE(res[i] == 0.0f);
        REQUIRE(std::fabs(fed[l][i] - applied[l][i]) <= 1e-4 * (1.0 + std::fabs(fed[l][i])));
      }
    }
    CHECK(rt.progress_stats().groups_completed == iterations * groups);
    rt.write_trace();
  }
  // Its own wire posted every exchange.
  CHECK(omgs_test::reduce_bcast_posts() - posts_before == long(iterations * groups));
  // The trace names the collective of each group.
  std::ifstream in("omgs_test_reduce_bcast_trace." + std::to_string(world_rank()) + ".json");
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("reduce_bcast") != std::string::npos);
}

TEST_CASE("registered collective: not chosen where dearer or not allowed", "[runtime][table]") {
  const Collective rb = omgs_test::register_reduce_bcast();
  {
    omgs::Runtime dear(MPI_COMM_WORLD, layers(),
                       options(write_model("omgs_test_rb_dear.json", "1e-2"), rb));
    CHECK(omgs_test::count_collective(dear.plan().groups, rb) == 0);
    CHECK(dear.plan().dense_groups() == dear.plan().groups.size());  // the allreduce instead
  }
  omgs::RuntimeOptions opt = options(write_model("omgs_test_rb_cheap2.json", "1e-5"), rb);
  opt.collectives = {};  // the default: sparse_exchange's rows and the dense allreduce
  omgs::Runtime not_allowed(MPI_COMM_WORLD, layers(), opt);
  CHECK(omgs_test::count_collective(not_allowed.plan().groups, rb) == 0);
}

TEST_CASE("registered collective: ranks that allow different collectives are refused",
          "[runtime][table]") {
  if (world_size() < 2) return;
  const Collective rb = omgs_test::register_reduce_bcast();
  omgs::RuntimeOptions opt = options(write_model("omgs_test_rb_cheap3.json", "1e-5"), rb);
  if (world_rank() == 1) opt.collectives.erase(rb);
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, layers(), opt),
                    Catch::Contains("disagree on the option collectives"));
}

TEST_CASE("registered collective: its line calibrated at start-up where a run may use it",
          "[runtime][table][calibration]") {
  const Collective rb = omgs_test::register_reduce_bcast();
  omgs::RuntimeOptions opt = options("calibrate", rb);
  const long before = omgs_test::reduce_bcast_calibrations();
  {
    omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
    CHECK(omgs_test::reduce_bcast_calibrations() - before == 1);
    // The calibrated model prices it (every rank the same: the slowest rank's fit).
    REQUIRE(rt.perf_model().knows_collective("reduce_bcast", world_size()));
    const double t = rt.perf_model().collective_s("reduce_bcast", 65536, world_size(), 0.0);
    CHECK(t > 0.0);
    char exact[64];
    std::snprintf(exact, sizeof exact, "%a", t);
    CHECK(omgs_test::same_everywhere(exact));
  }
  opt.collectives = {};  // not allowed: not timed, and the model does not know it
  omgs::Runtime rt(MPI_COMM_WORLD, layers(), opt);
  CHECK(omgs_test::reduce_bcast_calibrations() - before == 1);
  CHECK_FALSE(rt.perf_model().knows_collective("reduce_bcast", world_size()));
}
