// A plan's memory per rank (omgs::group_memory_bytes, omgs-plan --footprint) and the byte
// counts that bound it (omgs::parse_byte_size: --memory-budget, OMGS_MEMORY_BUDGET).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <omgs/plan.hpp>

#include "omgs_catch.hpp"

TEST_CASE("byte counts: numbers with binary or decimal units", "[plan][footprint]") {
  CHECK(omgs::parse_byte_size("0") == 0);
  CHECK(omgs::parse_byte_size("4096") == 4096);
  CHECK(omgs::parse_byte_size("17B") == 17);
  CHECK(omgs::parse_byte_size("3KiB") == 3 * 1024);
  CHECK(omgs::parse_byte_size("512MiB") == std::uint64_t{512} << 20);
  CHECK(omgs::parse_byte_size("2GiB") == std::uint64_t{2} << 30);
  CHECK(omgs::parse_byte_size("1TiB") == std::uint64_t{1} << 40);
  CHECK(omgs::parse_byte_size("1.5GB") == 1'500'000'000);
  CHECK(omgs::parse_byte_size("2kB") == 2000);
  CHECK(omgs::parse_byte_size("2KB") == 2000);
  CHECK(omgs::parse_byte_size("7MB") == 7'000'000);
  CHECK(omgs::parse_byte_size("3TB") == 3'000'000'000'000);
  CHECK(omgs::parse_byte_size("312.5KiB") == 320000);
  CHECK(omgs::parse_byte_size("0.7B") == 0);  // rounded down
  CHECK_THROWS_WITH(omgs::parse_byte_size(""),
                    Catch::Contains("'' is not a byte count (no number"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("GiB"), Catch::Contains("no number"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("-1"), Catch::Contains("no number"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("1..5"), Catch::Contains("no number"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("2XB"), Catch::Contains("unknown unit 'XB'"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("2 GiB"), Catch::Contains("unknown unit ' GiB'"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("1e9"), Catch::Contains("unknown unit 'e9'"));
  CHECK_THROWS_WITH(omgs::parse_byte_size("99999999999TiB"),
                    Catch::Contains("more than 2^64-1 bytes"));
}

TEST_CASE("a plan's memory per rank is each group's row at P", "[plan][footprint]") {
  omgs::Plan plan;
  plan.groups = {{0, 2, 30000, omgs::Collective::sparse},
                 {2, 3, 5000, omgs::Collective::dense},
                 {3, 5, 100000, omgs::Collective::sparse_allreduce}};
  const double d = 0.01;
  for (int p : {1, 4, 4096}) {
    CAPTURE(p);
    const std::vector<double> b = omgs::group_memory_bytes(plan, p, d);
    REQUIRE(b.size() == 3);
    // The allgather: k of this rank's pairs sent, P k received, 8 bytes a pair.
    CHECK(b[0] == 8.0 * 300 * (1 + p));
    // The dense allreduce: the group's floats sent and received.
    CHECK(b[1] == 8.0 * 5000);
    // The sparse allreduce: k pairs sent, S = k + P - 1 survivors (the threshold bin's ties
    // cut, at most n), k dropped, and the engine's room: 3 k own, the window's 2 k keys, the
    // received scratch, 3 x the region's sums (at most n / P + 1), S survivors, k dropped
    // (tests/plan/test_collective_table.cpp by hand). Not P k.
    const double sums = std::min(100000.0 / p + 1.0, 4000.0);
    const double s = std::min(100000.0, 1000.0 + p - 1);
    const double room = 3000.0 + std::max({2000.0, 1000.0 + std::floor(sums), s}) +
                        3.0 * std::floor(sums) + s + 3000.0;
    CHECK(b[2] == 8.0 * (1000.0 + s + 1000 + room));
  }
  CHECK(omgs::group_memory_bytes(omgs::Plan{}, 4, d).empty());
}

TEST_CASE("the choosers never pick a candidate over the budget that another keeps",
          "[plan][footprint]") {
  // A 200 Gbit/s fabric: the 3 M-element layer is cheapest dense (24 MB per rank at P = 64);
  // its allgather needs 8 x 30000 x 65 = 15.6 MB. The dense planner's plan cannot keep
  // within 16 MiB (its one layer is too big for its row), MGS's single sparse group can.
  const auto model = omgs::AlphaBetaModel::from_json(
      R"({"type": "alpha_beta", "topk": {"form": "nlogn", "c0_s": 0, "c1_s": 2.18896957e-10},
          "allgather": [], "allgather_formula": {"alpha_s": 0, "alpha_log2p_s": 1e-06,
          "alpha_p_s": 0, "beta_s_per_byte": 4e-11}, "allreduce_formula": {"alpha_s": 0,
          "alpha_log2p_s": 2e-06, "alpha_p_s": 0, "beta_s_per_byte": 4e-11}})");
  const std::vector<omgs::LayerSpec> layers = {
      {"a", 1000, 1e-4}, {"b", 2000, 1e-4}, {"c", 3000000, 1e-3}};
  omgs::PlanConfig c{64, 0.01, 8192};
  const double budget = 16.0 * 1024 * 1024;
  auto largest = [&](const omgs::Plan& p) {
    double m = 0.0;
    for (double b : omgs::group_memory_bytes(p, c.workers, c.density)) m = std::max(m, b);
    return m;
  };
  for (omgs::Planner p : {omgs::Planner::mixed, omgs::Planner::automatic}) {
    CAPTURE(omgs::to_string(p));
    c.memory_budget_bytes = 0;
    CHECK(largest(omgs::make_plan(p, layers, model, c)) > budget);  // the budget matters
    c.memory_budget_bytes = static_cast<std::uint64_t>(budget);
    CHECK(largest(omgs::make_plan(p, layers, model, c)) <= budget);
    CHECK(largest(omgs::make_plan(omgs::Planner::dense, layers, model, c)) > budget);
  }
  // Every candidate over the budget (1 MB: no row serves the 3 M layer): a plan all the same.
  c.memory_budget_bytes = 1'000'000;
  CHECK(largest(omgs::make_plan(omgs::Planner::mixed, layers, model, c)) > 1e6);
}
