// RuntimeOptions::memory_budget_bytes and OMGS_MEMORY_BUDGET (issue 48): the choosing
// planners keep every group's exchange within the budget per rank, the run works, and ranks
// that give different budgets are refused on every rank, naming the option.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <omgs/runtime.hpp>

#include "omgs_catch.hpp"
#include "runtime_test_support.hpp"
#include "sparse_options.hpp"

using omgs_test::world_rank;
using omgs_test::world_size;

namespace {

// Top-k costs 1 us per element and the allreduce 1 ms a call: without a budget the optimal
// plan is one dense group of every layer (8 x 20000 floats, send and receive: 1.28 MB).
std::vector<omgs::LayerSpec> budget_layers() {
  std::vector<omgs::LayerSpec> layers;
  for (int i = 0; i < 8; ++i) layers.push_back({"l" + std::to_string(i), 20000, 1e-4});
  return layers;
}

std::string budget_model() {
  return omgs_test::write_on_rank0(
      "omgs_test_memory_budget_perf.json",
      R"({"type": "alpha_beta", "topk": {"form": "linear", "c0_s": 0, "c1_s": 1e-6},
          "allgather": [], "allgather_formula": {"alpha_s": 0, "beta_s_per_byte": 1e-12},
          "allreduce_formula": {"alpha_s": 1e-3, "beta_s_per_byte": 1e-12}})");
}

omgs::RuntimeOptions budget_options(omgs::Planner planner, const std::string& perf) {
  omgs::RuntimeOptions opt = omgs_test::sparse_options();
  opt.density = 0.05;
  opt.planner = planner;
  opt.perf_model = perf;
  opt.backward_times = omgs::BackwardTimes::given;
  opt.read_environment = false;
  return opt;
}

constexpr std::uint64_t budget = 8 * 40000;  // a dense group of two layers at most

double largest_group_bytes(const omgs::Runtime& rt, double density) {
  double largest = 0.0;
  for (double b : omgs::group_memory_bytes(rt.plan(), world_size(), density))
    largest = std::max(largest, b);
  return largest;
}

// One iteration: every layer ready in backward order, the exchange finishes.
void run_iteration(omgs::Runtime& rt) {
  for (std::size_t l = rt.layers().size(); l-- > 0;) {
    omgs_test::copy_to(rt.gradient(l), std::vector<float>(rt.layers()[l].numel, 1.0f));
    REQUIRE(rt.ready(l) == omgs::Status::ok);
  }
  CHECK(rt.finish().status == omgs::Status::ok);
}

}  // namespace

TEST_CASE("a memory budget keeps the chosen plan's groups within it", "[runtime][budget]") {
  const std::string perf = budget_model();
  for (omgs::Planner planner : {omgs::Planner::optimal, omgs::Planner::mixed}) {
    CAPTURE(omgs::to_string(planner));
    omgs::RuntimeOptions opt = budget_options(planner, perf);
    {
      omgs::Runtime unlimited(MPI_COMM_WORLD, budget_layers(), opt);
      CHECK(largest_group_bytes(unlimited, opt.density) > double(budget));  // not vacuous
    }
    opt.memory_budget_bytes = budget;
    omgs::Runtime rt(MPI_COMM_WORLD, budget_layers(), opt);
    CHECK(rt.plan().groups.size() > 1);
    CHECK(largest_group_bytes(rt, opt.density) <= double(budget));
    run_iteration(rt);
    // The runtime's stats report its footprint per group and for the plan: a pair group's is
    // the planner's row; a dense group's send and receive floats are the runtime's flat
    // per-element buffers, which the row counts and the group's footprint does not.
    const omgs::RuntimeStats st = rt.stats();
    const std::vector<double> rows = omgs::group_memory_bytes(rt.plan(), world_size(), opt.density);
    REQUIRE(st.footprint.group_bytes.size() == rows.size());
    std::uint64_t sum = 0;
    for (std::size_t g = 0; g < rows.size(); ++g) {
      if (rt.plan().groups[g].collective == omgs::Collective::dense)
        CHECK(double(st.footprint.group_bytes[g]) < rows[g]);
      else
        CHECK(double(st.footprint.group_bytes[g]) == rows[g]);
      sum += st.footprint.group_bytes[g];
    }
    CHECK(st.footprint.plan_bytes == sum);
    CHECK(st.footprint.plan_bytes > 0);
  }
}

TEST_CASE("the stats' footprint of a sparse-allreduce plan is the planner's at this P",
          "[runtime][budget]") {
  omgs::RuntimeOptions opt = budget_options(omgs::Planner::mgs, budget_model());
  opt.sparse_exchange = omgs::SparseExchange::allreduce;
  omgs::Runtime rt(MPI_COMM_WORLD, budget_layers(), opt);
  run_iteration(rt);
  const omgs::RuntimeStats st = rt.stats();
  const std::vector<double> rows = omgs::group_memory_bytes(rt.plan(), world_size(), opt.density);
  REQUIRE(st.footprint.group_bytes.size() == rows.size());
  for (std::size_t g = 0; g < rows.size(); ++g) {
    CHECK(rt.plan().groups[g].collective == omgs::Collective::sparse_allreduce);
    CHECK(double(st.footprint.group_bytes[g]) == rows[g]);
  }
}

TEST_CASE("OMGS_MEMORY_BUDGET sets the budget; a bad value is refused naming it",
          "[runtime][budget]") {
  const std::string perf = budget_model();
  omgs::RuntimeOptions opt = budget_options(omgs::Planner::optimal, perf);
  opt.read_environment = true;
  setenv("OMGS_MEMORY_BUDGET", "312.5KiB", 1);  // 320000 bytes
  {
    omgs::Runtime rt(MPI_COMM_WORLD, budget_layers(), opt);
    CHECK(largest_group_bytes(rt, opt.density) <= double(budget));
  }
  setenv("OMGS_MEMORY_BUDGET", "2XB", 1);
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, budget_layers(), opt),
                    Catch::Contains("OMGS_MEMORY_BUDGET='2XB' is not a byte count"));
  unsetenv("OMGS_MEMORY_BUDGET");
}

TEST_CASE("ranks with different memory budgets are refused on every rank", "[runtime][budget]") {
  if (world_size() < 2) return;
  omgs::RuntimeOptions opt = budget_options(omgs::Planner::optimal, budget_model());
  opt.memory_budget_bytes = world_rank() == 0 ? budget : 2 * budget;
  CHECK_THROWS_WITH(omgs::Runtime(MPI_COMM_WORLD, budget_layers(), opt),
                    Catch::Contains("ranks disagree on the option memory_budget_bytes"));
}
